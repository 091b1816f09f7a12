"""`xtalk characterize`: probes × enemies × copies → matrix (Parquet, CSV), heat map, text."""

import json

import numpy as np
import pandas as pd
import pytest

from conftest import needs_two_cpus, processes_named, xtalk
from xtalk.characterize import PROBES, channels_text


@pytest.mark.slow  # a characterisation of 3 enemies × every probe: make test-slow
@needs_two_cpus
def test_a_small_characterisation_writes_matrix_heatmap_and_text(tmp_path, facts):
    out = xtalk("characterize", "--quick", "--results", tmp_path, "--enemy", "llc", "--enemy", "syscall",
                "--repetitions", "1", "--jobs", "5", "--json")
    assert out.returncode == 0, out.stderr + out.stdout
    (d,) = tmp_path.iterdir()
    m = pd.read_parquet(d / "matrix.parquet")
    doc = json.loads(out.stdout)  # --json: the matrix on stdout, the progress on stderr
    assert doc["kind"] == "characterize" and len(doc["rows"]) == len(m) and "Interference channels" in doc["channels"]
    copies = len(facts.online_cpus) - 1
    n_counts = min(copies, 2)
    assert len(m) == len(PROBES) * 3 * n_counts
    assert set(m.probe) == {p.name for p in PROBES} and set(m.enemy) == {"llc", "syscall", "pi"}  # pi: the control
    assert m.copies.min() == 1 and m.copies.max() == copies
    assert (m.slowdown > 0).all() and (m.lo <= m.slowdown).all() and (m.slowdown <= m.hi).all()
    assert (m[m.probe == "wakeup"].metric == "wakeup_latency_ns").all()
    pd.testing.assert_frame_equal(pd.read_csv(d / "matrix.csv"), m, check_dtype=False)
    assert (d / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (d / "heatmap.svg").read_bytes()[:1000]
    assert "Interference channels" in (d / "channels.md").read_text()
    assert "## What each enemy loads" in (d / "channels.md").read_text()  # rate and share of the peak (test_peaks.py)
    assert set(pd.read_csv(d / "enemy-loads.csv").enemy) == {"llc", "syscall", "pi"}
    assert not processes_named()


def test_channels_text_names_what_matters():
    m = pd.DataFrame([
        {"probe": "llc-chase", "resource": "last-level cache", "enemy": "llc", "copies": 1, "slowdown": 3.0, "lo": 2.5, "hi": 3.5},
        {"probe": "llc-chase", "resource": "last-level cache", "enemy": "pi", "copies": 1, "slowdown": 1.01, "lo": 0.98, "hi": 1.03},
        {"probe": "syscall", "resource": "kernel", "enemy": "llc", "copies": 1, "slowdown": 1.2, "lo": 1.0, "hi": 1.4},
    ])
    text = channels_text(m, "test box")
    assert "llc-chase" in text and "llc ×1 → 3.00×" in text
    assert "pi ×1" not in text, "a slowdown whose CI includes 1 is not a channel"
    assert "disturbed measurably: syscall" in text
    none = channels_text(m.assign(lo=np.ones(3) * 0.9), "test box")
    assert "no channel stands out" in none and "Largest point estimates" in none and "llc-chase × llc ×1 3.00×" in none


def test_json_document_gives_the_matrix_with_units_as_fields(tmp_path):
    """`characterize --json`: the verdict document's header (schema_version, kind, results,
    provenance), the matrix as rows (the solo median as {value, unit}, the slowdown with its
    CI), the enemies' loads and the channels text, read from the directory it wrote."""
    from xtalk.characterize import json_document

    row = {"resource": "last-level cache", "metric": "exec_ns", "copies": 1, "solo_median_ns": 1.5e6, "runs": 2, "jobs": 60}
    m = pd.DataFrame([{**row, "probe": "llc-chase", "enemy": "llc", "slowdown": 3.0, "lo": 2.5, "hi": 3.5},
                      {**row, "probe": "llc-chase", "enemy": "pi", "slowdown": 1.01, "lo": 0.98, "hi": 1.03}])
    m.to_parquet(tmp_path / "matrix.parquet", index=False)
    pd.DataFrame([{"enemy": "llc", "copies": 1, "kind": "llc", "channel": "llc", "unit": "MB/s", "rate_per_copy": 900.0,
                   "percent_of_peak": np.nan, "basis": "", "signature": ""}]).to_csv(tmp_path / "enemy-loads.csv", index=False)
    (tmp_path / "channels.md").write_text(channels_text(m, "test box"))
    doc = json_document(tmp_path)
    assert doc["schema_version"] == 1 and doc["kind"] == "characterize" and doc["results"] == str(tmp_path)
    assert doc["provenance"]["xtalk_version"] and doc["level"] == 0.95
    (row,) = [r for r in doc["rows"] if r["enemy"] == "llc"]
    assert row["solo_median"] == {"value": 1.5e6, "unit": "ns"} and row["lo"] <= row["slowdown"] <= row["hi"]
    assert doc["enemy_loads"][0]["rate_per_copy"] == 900.0 and doc["enemy_loads"][0]["percent_of_peak"] is None
    assert "llc ×1 → 3.00×" in doc["channels"]
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN
    refused = xtalk("characterize", "--plan", "--json")
    assert refused.returncode == 2 and refused.stderr.strip().startswith("xtalk: --json: "), refused.stderr


def test_unknown_enemy_is_refused(tmp_path):
    out = xtalk("characterize", "--quick", "--results", tmp_path, "--enemy", "gremlin")
    assert out.returncode == 2 and "unknown enemy 'gremlin'" in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_channel_the_cpu_only_control_reproduces_is_not_claimed():
    row = {"resource": "r", "copies": 1}
    m = pd.DataFrame([
        {**row, "probe": "llc-chase", "enemy": "llc", "slowdown": 1.9, "lo": 1.6, "hi": 2.2},
        {**row, "probe": "llc-chase", "enemy": "pi", "slowdown": 1.8, "lo": 1.5, "hi": 2.1},  # the control
        {**row, "probe": "dram-latency", "enemy": "read", "slowdown": 3.0, "lo": 2.6, "hi": 3.4},
        {**row, "probe": "dram-latency", "enemy": "pi", "slowdown": 1.0, "lo": 0.97, "hi": 1.04},
    ])
    text = channels_text(m, "test box")
    assert "**dram-latency**" in text and "read ×1 → 3.00×" in text, text
    assert "**llc-chase**" not in text and "Not told apart from the control" in text and "llc-chase × llc ×1 1.90×" in text
    assert "The CPU-only control (pi, no memory traffic) slows llc-chase ×1 1.80×" in text
