"""tracefs mounted for the agents that need it and unmounted by the last (agent/src/observe/
tracefs.rs), on a machine where it is not mounted: in a private mount namespace where it was
unmounted first, so the host's mount, if any, is left alone. Agents started together once
raced (both mounted it; the second was refused with EBUSY, as a clean CI machine showed)."""

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import small_plan, write_plan

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, tracefs)"),
    pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare (util-linux)"),
    pytest.mark.skipif(not os.path.isdir("/sys/kernel/tracing"), reason="no /sys/kernel/tracing (a kernel without tracefs)"),
]

# Unmount every tracefs in the namespace (the host keeps its own); then the script.
PRELUDE = textwrap.dedent("""\
    for m in $(awk '$3 == "tracefs" {print $2}' /proc/self/mounts); do umount -l "$m" || exit 99; done
    tracefs_here() { awk '$3 == "tracefs" {print $2}' /proc/self/mounts; }
    marker="/run/xtalk/tracefs-mounted.$(stat -L -c %i /proc/self/ns/mnt)"
""")


def _in_namespace(script: str, *args) -> subprocess.CompletedProcess:
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c", PRELUDE + textwrap.dedent(script), "ns", *map(str, args)],
                       capture_output=True, text=True, timeout=240)
    if p.returncode == 99:
        pytest.skip(f"cannot unmount tracefs in a private namespace: {p.stderr.strip()}")
    return p


def test_agents_started_together_mount_once_and_the_last_unmounts(agent, tmp_path, facts):
    check_plan = small_plan(jobs=5)
    check_plan["trace"] = {"events": ["sched:sched_switch"]}
    run_plan = small_plan(jobs=30, cpus=[facts.online_cpus[-1]])
    run_plan["trace"] = {}
    checks = write_plan(tmp_path, check_plan, "check.json")
    runs = write_plan(tmp_path, run_plan, "run.json")
    p = _in_namespace("""\
        agent=$1 checks=$2 runs=$3 out=$4
        pids=()
        for i in 1 2 3 4 5 6; do "$agent" check "$checks" > "$out/check$i.log" 2>&1 & pids+=($!); done
        for i in 1 2; do "$agent" run "$runs" --out "$out/run$i" > "$out/run$i.log" 2>&1 & pids+=($!); done
        rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done
        echo "rc=$rc"
        echo "mounted=[$(tracefs_here)]"
        [ -e "$marker" ] && echo "marker left" || echo "no marker"
    """, agent, checks, runs, tmp_path)
    logs = "".join(f"{f.name}: {f.read_text()}" for f in sorted(tmp_path.glob("*.log")))
    assert "rc=0" in p.stdout, p.stdout + p.stderr + logs
    assert "mounted=[]" in p.stdout, "the last agent unmounts the tracefs xtalk mounted: " + p.stdout
    assert "no marker" in p.stdout, p.stdout
    for i in (1, 2):
        assert (tmp_path / f"run{i}" / "trace.dat").stat().st_size > 0


def test_a_mount_the_agent_did_not_make_is_left_mounted(agent, tmp_path):
    plan = small_plan(jobs=5)
    plan["trace"] = {"events": ["sched:sched_switch"]}
    p = _in_namespace("""\
        mount -t tracefs nodev /sys/kernel/tracing || exit 99
        "$1" check "$2" || exit 1
        echo "mounted=[$(tracefs_here)]"
    """, agent, write_plan(tmp_path, plan))
    assert p.returncode == 0 and "mounted=[/sys/kernel/tracing]" in p.stdout, p.stdout + p.stderr


def test_recover_unmounts_what_a_killed_agent_mounted(agent, tmp_path, facts):
    plan = small_plan(jobs=10_000, cpus=[facts.online_cpus[-1]])
    plan["timeout_s"] = 120
    plan["trace"] = {}
    p = _in_namespace("""\
        "$1" run "$2" --out "$3/run" > "$3/run.log" 2>&1 &
        a=$!
        for i in $(seq 200); do [ -n "$(ls /sys/kernel/tracing/instances 2>/dev/null | grep xtalk-)" ] && break; sleep 0.05; done
        echo "traced=[$(ls /sys/kernel/tracing/instances | grep xtalk-)]"
        kill -KILL $a; wait $a
        "$1" recover
        echo "mounted=[$(tracefs_here)]"
        [ -e "$marker" ] && echo "marker left" || echo "no marker"
    """, agent, write_plan(tmp_path, plan), tmp_path)
    assert "traced=[xtalk-" in p.stdout, p.stdout + p.stderr + (tmp_path / "run.log").read_text()
    assert "unmounted tracefs at /sys/kernel/tracing, which xtalk had mounted" in p.stdout + p.stderr, p.stdout + p.stderr
    assert "mounted=[]" in p.stdout and "no marker" in p.stdout, p.stdout + p.stderr
