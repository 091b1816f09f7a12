"""`xtalk evidence RESULTS... --out BUNDLE`: the inputs loaded, each objective's finding,
the page, the raw data, the PDF, the manifest and its signature, in that order (the manifest
covers everything before it; the signature covers the manifest)."""

from __future__ import annotations

import datetime as dt
import getpass
import os
import platform
import socket
import sys
from pathlib import Path

import pandas as pd

from .. import safepath
from ..errors import UsageError
from ..provenance import git_commit
from ..version import __version__
from . import manifest as mf
from .inputs import Input, load_inputs
from .objectives import Finding, findings
from .page import TRACED_BY, render
from .views import ecss, iso26262
from .pdf import print_pdf


def _operator() -> str:
    """Who made the bundle: the user behind sudo, else the login."""
    return os.environ.get("SUDO_USER") or getpass.getuser()


def matrix(found: list[Finding], artifacts: dict[str, dict[str, str]]) -> pd.DataFrame:
    """Objective → artifact → run ids, one row per artifact (a not-covered objective: one row
    saying why)."""
    rows = []
    for f in found:
        if f.not_covered:
            rows.append({"objective": f.id, "artifact": "–", "runs": 0, "run_ids": f"not covered: {f.not_covered}"})
        for name in f.tables:
            ids = f.sources.get(name, [])
            rows.append({"objective": f.id, "artifact": artifacts[f.id][name], "runs": len(ids),
                         "run_ids": " ".join(ids) if ids else "–"})
        if f.id == TRACED_BY:  # the matrix itself answers this objective
            rows.append({"objective": f.id, "artifact": "traceability.csv", "runs": 0, "run_ids": "every row above"})
    return pd.DataFrame(rows, columns=["objective", "artifact", "runs", "run_ids"])


def _raw(out: Path, inp: Input) -> list[str]:
    """The input's raw data under data/<name>/: its experiment (or campaign) files as written,
    the runs, verdicts, pWCET and misses tables, and each run's run.json, plan and job tables
    where the input has them (runs/<id>/...: data/<name>/ reads as a results directory, what
    `xtalk evidence replay` compares against); the files written at the top."""
    d = out / "data" / inp.name
    written = []
    for name in ("experiment.toml", "experiment.json", "campaign.toml", "campaign.json"):
        src = inp.path / name
        if src.is_file():
            safepath.write_bytes(d / name, src.read_bytes(), parents=True)
            written.append(name)
    for name, table in (("runs", inp.runs()), ("verdicts", inp.verdicts()), ("pwcet", inp.pwcet()),
                        ("misses", inp.misses())):
        safepath.makedirs(d)
        safepath.write_csv(table, d / f"{name}.csv", index=False)
        written.append(f"{name}.csv")
    for run_dir in inp.data.runs["dir"]:
        for src in _run_files(Path(run_dir)):
            rel = src.relative_to(inp.path)
            safepath.write_bytes(d / rel, src.read_bytes(), parents=True)
    return written


def _run_files(run_dir: Path) -> list[Path]:
    """What a replay needs of one run and the store reads: its run.json (outcome and plan),
    plan.json, and every job table (jobs.parquet, an application's under its name); links
    are not files of the run and are left out."""
    out = [run_dir / n for n in ("run.json", "plan.json")]
    out += sorted(run_dir.glob("*.parquet")) + sorted(run_dir.glob("*/*.parquet"))
    return [p for p in out if p.is_file() and not p.is_symlink()]


def _agent(inp: Input) -> dict | None:
    """The agent binary experiment.json names, hashed as it is now (it may have been rebuilt
    since the runs: the manifest says when it was hashed)."""
    path = inp.experiment.get("agent")
    if not path or not Path(path).is_file():
        return None
    return {"path": path, "sha256_now": mf.sha256(Path(path))}


def _header(inputs: list[Input], signer: str | None, command: str | None) -> dict:
    """The page's and the manifest's metadata: tool, commit, command, operator, date, inputs, key."""
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    header = {
        "title": "xtalk evidence: " + ", ".join(i.name for i in inputs),
        "tool": f"xtalk {__version__}", "commit": git_commit(),
        "command": command or " ".join(["xtalk", *sys.argv[1:]]),
        "operator": _operator(), "date": now.isoformat(),
        "host": socket.gethostname(), "inputs": ", ".join(str(i.path) for i in inputs),
        "runs": str(sum(len(i.data.runs) for i in inputs)),
        "signed by": f"{signer.split()[0]} {mf.fingerprint(signer)}" if signer else "not signed (no --key)",
    }
    for i in inputs:  # what made each input, where it says
        if i.experiment.get("xtalk_version") or i.experiment.get("git_commit"):
            header[f"{i.name} made with"] = f"xtalk {i.experiment.get('xtalk_version', '?')} {i.experiment.get('git_commit', '')}"
    return header


def build(results: list[Path], out: Path, key: Path | None = None, *, n_boot: int = 2000,
          pdf: bool = True, command: str | None = None, say=print, ecss_margins: dict[str, float] | None = None) -> Path:
    """Write the bundle of ``results`` to ``out`` (new or empty); returns index.html.
    ``key``: the SSH private key that signs manifest.json; ``pdf``: print index.pdf too;
    ``say``: one line per thing done; ``ecss_margins``: review -> CPU margin of the ECSS view."""
    if not results:
        raise UsageError("xtalk evidence: give at least one results directory")
    signer = mf.check_key(Path(key).expanduser()) if key is not None else None  # a bad key fails before any work
    out = safepath.results_dir(out, "--out")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: a file, not a directory; give a new directory for the bundle")
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"--out {out}: not empty; a bundle is written whole into a new directory (give another)")
    inputs = load_inputs(results, n_boot)
    found = findings(inputs)
    # The views before the summary, whose matrix lists them too.
    found[len(found) - 1:len(found) - 1] = [iso26262(inputs), ecss(inputs, ecss_margins)]
    safepath.makedirs(out)
    artifacts: dict[str, dict[str, str]] = {}
    for f in found:
        artifacts[f.id] = {}
        for name, table in f.tables.items():
            rel = f"objectives/{f.id}/{name}.csv"
            safepath.makedirs(out / "objectives" / f.id)
            safepath.write_csv(table, out / rel, index=False)
            artifacts[f.id][name] = rel
    trace = matrix(found, artifacts)
    safepath.write_csv(trace, out / "traceability.csv", index=False)
    raw = {inp.name: _raw(out, inp) for inp in inputs}
    header = _header(inputs, signer, command)
    html_path = out / "index.html"
    safepath.write_text(html_path, render(header, found, artifacts, trace))
    printed, why = print_pdf(html_path) if pdf else (None, "")
    if printed is not None:
        safepath.write_bytes(out / "index.pdf", printed)
    elif why:
        say(why)
    if signer:
        safepath.write_text(out / mf.SIGNER, signer + "\n")  # before the manifest: its hash is in it
    environment = {"python": sys.version.split()[0], "platform": platform.platform(), "machine": platform.machine(),
                   "kernel": platform.release()}
    mf.write(out, {**{k: v for k, v in header.items() if k != "title"}, "environment": environment},
             [{"name": i.name, "path": str(i.path), "kind": "campaign" if i.campaign else "experiment",
               "files": mf.input_hashes(i.path), "agent": _agent(i), "raw": raw[i.name]} for i in inputs])
    if key is not None:
        mf.sign(out, Path(key).expanduser())
    objectives = [f for f in found if f.id.startswith("MCP_")]
    covered = sum(1 for f in objectives if not f.not_covered)
    say(f"evidence: {html_path} ({covered} of {len(objectives)} objectives covered"
        + (", signed" if key is not None else ", not signed: pass --key ~/.ssh/id_ed25519") + ")")
    for f in found:
        if f.not_covered:
            say(f"  {f.id}: not covered: {f.not_covered}")
    return html_path
