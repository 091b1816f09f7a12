"""Is a TOML file a campaign or an experiment? Answered from the raw TOML, without the
campaign's models (whose build `xtalk plan` and `xtalk run` of an experiment would pay)."""

from __future__ import annotations

from pathlib import Path
from typing import Union

from ..config.tomlfile import parse_toml, read_text
from ..errors import UsageError


def is_campaign_file(path: Union[str, Path]) -> bool:
    """A campaign file has `[[application]]` tables, each with its `victim`, and no top-level
    `[victim]` (which makes an experiment file; so do applications with a `body`, measured
    side by side); unreadable or invalid TOML is left to the experiment parser."""
    try:
        data = parse_toml(read_text(Path(path)), str(path))
    except UsageError:
        return False
    apps = data.get("application")
    if not isinstance(apps, list) or "victim" in data:
        return False
    return not any(isinstance(a, dict) and "body" in a for a in apps)
