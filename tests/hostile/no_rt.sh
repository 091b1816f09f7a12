#!/usr/bin/env bash
# The agent-driven `hostile` tests from inside a cgroup with no real-time runtime, the way a
# container sees it: a child of the v1 cpu hierarchy with cpu.rt_runtime_us = 0, so
# SCHED_FIFO and SCHED_RR are refused to every process in it (SCHED_DEADLINE is not
# governed by it). Tests that need those policies must skip, or the agent adapt, with the
# reason. The group is removed whatever happens. Usage (root):
#   tests/hostile/no_rt.sh [pytest args...]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root no_rt
CPU=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ {print $2; exit}' /proc/self/mounts)
if [ -z "$CPU" ] || [ ! -e "$CPU/cpu.rt_runtime_us" ]; then
  echo "no_rt: needs a v1 cpu hierarchy with RT group scheduling (cpu.rt_runtime_us); nothing done" >&2
  exit 2
fi
GROUP="$CPU/hostile-nort-$$"
cleanup() {
  # Back to the root group, then every process still in the group goes (tests' stragglers).
  echo $$ >"$CPU/cgroup.procs" 2>/dev/null || true
  if [ -d "$GROUP" ]; then
    for _ in 1 2 3 4 5; do
      pids=$(cat "$GROUP/cgroup.procs" 2>/dev/null || true)
      [ -z "$pids" ] && break
      kill -KILL $pids 2>/dev/null || true
      sleep 0.2
    done
    rmdir "$GROUP" 2>/dev/null || echo "no_rt: could not remove $GROUP" >&2
  fi
  recover
}
trap cleanup EXIT
mkdir "$GROUP"
echo 0 >"$GROUP/cpu.rt_runtime_us"
echo $$ >"$GROUP/cgroup.procs"
echo "no_rt: running in $GROUP (cpu.rt_runtime_us = $(cat "$GROUP/cpu.rt_runtime_us"))"
cd "$ROOT"
# Not exec: the clean-up runs after the tests end, from outside the group. In the background
# so that an interrupt reaches the tests at once (bash runs traps only between commands).
"${PYTEST[@]}" "$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null || true; wait "$child" || true; exit 130' INT TERM
wait "$child"
