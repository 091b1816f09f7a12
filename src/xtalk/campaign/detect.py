"""Is a TOML file a campaign or an experiment? Answered from the raw TOML, without the
campaign's models (whose build `xtalk plan` and `xtalk run` of an experiment would pay)."""

from __future__ import annotations

from pathlib import Path
from typing import Union

from ..config.tomlfile import parse_toml, read_text
from ..errors import UsageError


#: Top-level keys only a campaign has: one of them makes a file of `[[application]]`s a campaign.
CAMPAIGN_KEYS = ("grid", "two_way", "exclude", "interleave", "kernels")


def is_campaign_file(path: Union[str, Path]) -> bool:
    """A file of `[[application]]` tables (and no top-level `[victim]`) is a campaign when it
    has a campaign-only key (`CAMPAIGN_KEYS`), or exactly one application (an experiment of
    applications measures two or more side by side), or an application written in the old
    campaign grammar (its victim in a nested `victim` table); otherwise an experiment.
    Unreadable or invalid TOML is left to the experiment parser."""
    try:
        data = parse_toml(read_text(Path(path)), str(path))
    except UsageError:
        return False
    apps = data.get("application")
    if not isinstance(apps, list) or "victim" in data:
        return False
    if any(isinstance(a, dict) and "victim" in a for a in apps):
        return True
    return any(k in data for k in CAMPAIGN_KEYS) or len(apps) == 1
