#!/usr/bin/env bash
# The agent on Arm, on this x86_64 machine: build the static aarch64 agent (musl), run its
# unit tests under qemu-user, then a 20-job run of it under qemu-user whose run.json and
# jobs.bin the host reads back and checks (tests/arm/check_run.py). Installs what it needs
# first (tests/arm/tools.sh). Each step prints how long it took. Root: the run moves itself
# into a cgroup, like every run of the agent.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
step() { local t=$SECONDS; echo "== $*"; "$@"; echo "== $* took $((SECONDS - t)) s"; }
[ -x .venv/bin/python ] || { echo "qemu_user.sh: run make setup first (the host reads the run back)" >&2; exit 2; }
TMP="$(mktemp -d /tmp/xtalk-arm.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT

step tests/arm/tools.sh
# The tests first: they build the agent as well (integration tests run it), so the build
# that follows only confirms it is there, and dependencies are compiled once.
step make -s test-agent-aarch64
step make -s agent-aarch64

# A 20-job run: the simplest victim (a sum over 64 KiB) beside one light enemy (pi), as a
# plan from the host would have it. Timing under emulation proves function, not performance:
# the check reads rows and their order, never their durations.
run_20_jobs() {
  local plan jobs=20 period=5000000
  plan='{"version": 1, "run_id": "arm-qemu-user", "timeout_s": 120, "settle_ms": 20,
         "victim": {"body": {"kind": "sum", "bytes": 65536}, "period_ns": '$period', "jobs": '$jobs', "warmup_jobs": 0},
         "enemies": [{"name": "pi", "load": {"kind": "pi"}}]}'
  echo "$plan" | qemu-aarch64-static agent/target/aarch64-unknown-linux-musl/release/xtalk-agent run - --out "$TMP/run"
  PYTHONPATH=src .venv/bin/python tests/arm/check_run.py "$TMP/run" "$jobs" "$period"
}
step run_20_jobs

# include/xtalk/probe.h on arm64 (the generic timer): the probe example built for aarch64 and
# run under qemu-user, where a cross C compiler is installed (gcc-aarch64-linux-gnu; the
# agent itself needs none, so CI does not install one).
probe_h_on_arm64() {
  if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
    echo "probe.h on arm64: not checked, no aarch64-linux-gnu-gcc (apt-get install gcc-aarch64-linux-gnu)"
    return 0
  fi
  local bin="$TMP/probe_demo"
  aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror -pthread -Iinclude examples/probes/probe_demo.c -o "$bin"
  qemu-aarch64-static "$bin" 20 2
}
step probe_h_on_arm64
