"""`xtalk plan --schema experiment` prints a JSON Schema of experiment files (`--schema campaign`
the campaign files'), for editors and checkers: every example file validates against its own
schema, a misspelled key does not, and an unknown schema name is refused in one line."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
import pytest

from conftest import xtalk

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# Experiment and campaign files; examples/models/ holds model inputs (`xtalk sched`), not these.
INPUTS = sorted(p for p in [*EXAMPLES.glob("*.toml"), *EXAMPLES.glob("ci/*.toml")])


@pytest.fixture(scope="module")
def schemas() -> dict[str, dict]:
    return {name: json.loads(xtalk("plan", "--schema", name).stdout) for name in ("experiment", "campaign")}


def _kind(path: Path) -> str:
    from xtalk.campaign.detect import is_campaign_file

    return "campaign" if is_campaign_file(path) else "experiment"


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_every_example_validates_against_its_schema(schemas, path):
    jsonschema.validate(tomllib.loads(path.read_text()), schemas[_kind(path)])


def test_a_misspelled_key_fails_the_schema(schemas):
    data = tomllib.loads((EXAMPLES / "quickstart.toml").read_text())
    data["victim"]["periodd"] = data["victim"].pop("period", "10ms")
    with pytest.raises(jsonschema.ValidationError, match="periodd"):
        jsonschema.validate(data, schemas["experiment"])


def test_the_schemas_are_draft_2020_12_and_name_themselves(schemas):
    for name, schema in schemas.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["title"] == f"xtalk {name}"


def test_an_unknown_schema_name_is_one_line_and_2():
    out = xtalk("plan", "--schema", "experimnt")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == ["xtalk: plan --schema: no schema named 'experimnt'; give plan, experiment or campaign"]
