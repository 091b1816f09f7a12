"""A stopped run copies what it recorded, not the job log's whole capacity (issue 13,
item 12: a run stopped after a few thousand of 5·10^6 jobs copied all 400 MB)."""

import json
import signal
import subprocess
import time

from conftest import small_plan, write_plan
from xtalk.store.jobs import read_job_log


def test_a_stopped_run_keeps_only_its_published_jobs(agent, tmp_path):
    jobs = 2_000_000  # 160 MB of capacity; a few hundred are recorded before the stop
    plan = small_plan(jobs=jobs, period_ns=100_000)
    plan["timeout_s"] = 3600
    out = tmp_path / "run"
    p = subprocess.Popen([agent, "run", write_plan(tmp_path, plan), "--out", out], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the victim has published some jobs
        try:
            if len(read_job_log(out / "jobs.bin")) > 50:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "interrupted", meta.get("reason")
    recorded = meta["jobs_recorded"]
    assert 50 < recorded < jobs + 2
    path = out / "jobs.bin"
    assert not path.is_symlink(), "moved into the run directory at the end of the run"
    assert path.stat().st_size == 64 + 80 * recorded, "only the published records are copied"
    assert len(read_job_log(path)) == recorded
