""""Did you mean": the nearest spelling of a mistyped key or value (an enemy kind, a field of a
table), for the one-line errors of experiment and campaign files."""

from __future__ import annotations

import difflib
import re
import typing

from pydantic import BaseModel


def did_you_mean(word, candidates) -> str:
    """`did you mean 'x'?` for the candidate closest to `word`, or "" when none is close."""
    if not isinstance(word, str):
        return ""
    found = difflib.get_close_matches(word, [c for c in candidates if c != word], n=1)
    return f"did you mean '{found[0]}'?" if found else ""


def quoted_choices(expected: str) -> list[str]:
    """The choices of a pydantic "should be 'a', 'b' or 'c'" message."""
    return re.findall(r"'([^']*)'", expected)


def keys_at(model: type[BaseModel] | None, loc: tuple, is_tag=lambda part: False) -> list[str]:
    """The keys the table at `loc` accepts (`loc`: an error's location up to the unknown key,
    through `model`'s fields; `is_tag`: the parts pydantic adds for unions and validators);
    [] when the path leads through anything but one model."""
    if model is None:
        return []
    for part in loc:
        if isinstance(part, int):
            continue
        fields = model.model_fields
        field = fields.get(part) or next((f for f in fields.values() if f.alias == part), None)
        if field is None:
            if is_tag(part):
                continue  # a union's or a validator's step in the location, not a key
            return []
        models = _models_in(field.annotation)
        if len(models) != 1:
            return []
        model = models[0]
    return [f.alias or name for name, f in model.model_fields.items()]


def _models_in(annotation) -> list[type[BaseModel]]:
    """The models an annotation holds (through Optional, list, dict, Annotated, Union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += [m for m in _models_in(arg) if m not in out]
    return out
