#!/bin/sh
# Native against the x86 guest (`make guest-test`, seed 001 ch. 3 and §3.3): the same latency
# campaign (examples/latency_guest.toml) run
#   1. natively on this machine (the local target),
#   2. in the guest (board/guest.sh: KVM where it works, TCG otherwise) through the SSH target,
#   3. in the guest again with its vCPU threads under a SCHED_DEADLINE reservation (Θ, Π)
#      from `xtalk sched vm examples/models/guest-vm.toml` (xtalk sched reserve, which gives
#      each thread its previous policy back afterwards);
# then ONE comparison, `xtalk compare` of the three (min / p50 / p99 / max µs per scenario),
# and board/check_guest.py: the runs came back complete, latency rows for every label, the
# reservation read back during the run (sched_getattr and /proc/TID/sched) and gone after it,
# the guest left clean. The guest is shut down at the end and qemu checked gone
# (XTALK_GUEST_KEEP=1 leaves it up).
#
#   board/guest-test.sh
#
# Results: CACHE/results/guest/RUN/ (CACHE: XTALK_BOARD_DIR, default build/board), RUN the
# start time; timings.txt there says how long each step took.
# XTALK_GUEST_CAMPAIGN: the campaign (default examples/latency_guest.toml); XTALK_GUEST_TASKSET:
# the task set behind (Θ, Π) (default examples/models/guest-vm.toml, guest-vm-tcg.toml under TCG); XTALK_PYTHON: the venv's
# python (default .venv/bin/python; this checkout's src/ comes first on its path).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/common.sh"
cache=$(board_dir)
py=${XTALK_PYTHON:-$repo/.venv/bin/python}
xbin=$(dirname "$py")/xtalk
[ -x "$py" ] && [ -x "$xbin" ] || die "no xtalk beside $py: run 'make setup' (or set XTALK_PYTHON to a venv's python with xtalk installed)"
# this checkout's sources first, whichever venv provides the dependencies
export XTALK_PYTHON="$py" PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}"
xtalk() { "$xbin" "$@"; }
campaign=${XTALK_GUEST_CAMPAIGN:-$repo/examples/latency_guest.toml}
results="$cache/results/guest/$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$results"
timings="$results/timings.txt"
t0=$(date +%s); tl=$t0
# the machine is shared: its load says how much the timings below had to share it
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)" > "$timings"
lap() { now=$(date +%s); echo "$1: $((now - tl)) s" >> "$timings"; say "  $1: $((now - tl)) s ($((now - t0)) s so far)"; tl=$now; }
newest() { d=$(ls -dt "$1"/*/ | head -1); echo "${d%/}"; }

[ "${XTALK_GUEST_KEEP:-0}" = 1 ] || trap '"$here/guest.sh" down' EXIT INT TERM
"$here/guest.sh" up
accel=$(cat "$cache/guest-run/accel")
# the task set behind (Θ, Π): the guest's work as KVM runs it, or as TCG does (about 4 times
# the CPU per wake-up: under the KVM-sized reservation a TCG guest misses nearly every period)
case $accel in tcg) dflt=guest-vm-tcg.toml ;; *) dflt=guest-vm.toml ;; esac
taskset=${XTALK_GUEST_TASKSET:-$repo/examples/models/$dflt}
lap "guest up ($accel)"

step "the guest's facts through the SSH target (ships the host's agent: same suite, same glibc)"
url=$("$here/guest.sh" url)
"$py" - "$url" "$results/guest-sysinfo.json" <<'PY'
import json, sys
from xtalk.targets.ssh import SshTarget
env = SshTarget.from_url(sys.argv[1]).facts().environment
open(sys.argv[2], "w").write(json.dumps(env, indent=2))
k, v = env["kernel"], env["virtualization"]
print(f"guest: {k['machine']} {k['release']} PREEMPT_RT {k['preempt_rt']}, hypervisor {v.get('vendor')}, emulated: {v.get('emulated')}")
PY
lap "agent shipped, guest facts read"

# CPU time of each vCPU thread (ns, /proc/TID/schedstat) and the wall clock around a guest
# campaign: how much of a host CPU the guest's vCPUs took, against the reservation's Θ/Π.
vcpus=$("$here/guest.sh" vcpus)
echo "$vcpus" > "$results/vcpus.txt"
cpu_mark() { printf '%s %s' "$1" "$(date +%s%N)"; for t in $vcpus; do printf ' %s:%s' "$t" "$(cut -d' ' -f1 "/proc/$t/schedstat")"; done; echo; }

step "1/3 $(basename "$campaign") natively on this machine"
xtalk campaign run "$campaign" --results "$results/native"
lap "native campaign"

step "2/3 $(basename "$campaign") in the guest ($accel)"
cpu_mark guest-start >> "$results/vcpu-cpu.txt"
xtalk campaign run "$campaign" --results "$results/guest" --target "$url"
cpu_mark guest-end >> "$results/vcpu-cpu.txt"
lap "guest campaign"

step "3/3 $(basename "$campaign") in the guest, its vCPU threads under SCHED_DEADLINE from $(basename "$taskset")"
xtalk sched vm "$taskset" | tee "$results/sched-vm.txt"
# During: each vCPU thread's policy as the scheduler shows it (6 = SCHED_DEADLINE), then the run.
during="for t in $vcpus; do echo \"\$t \$(sed -n 's/^policy *: *//p' /proc/\$t/sched)\"; done > '$results/policy-during.txt'"
cpu_mark guest-deadline-start >> "$results/vcpu-cpu.txt"
xtalk sched reserve --taskset "$taskset" --qmp "$cache/guest-run/qmp.sock" --record "$results/reserve.json" -- \
    sh -c "$during && exec \"\$@\"" sh "$xbin" campaign run "$campaign" --results "$results/guest-deadline" --target "$url"
cpu_mark guest-deadline-end >> "$results/vcpu-cpu.txt"
for t in $vcpus; do echo "$t $(sed -n 's/^policy *: *//p' "/proc/$t/sched")"; done > "$results/policy-after.txt"
lap "reserved guest campaign"

step "the comparison: native vs guest vs guest under the reservation"
xtalk compare "$(newest "$results/native")" "$(newest "$results/guest")" "$(newest "$results/guest-deadline")" \
    --label native --label "guest-$accel" --label guest-deadline --out "$results/compare"
lap "compare"

step "checks: the runs, the latency rows, the reservation, the guest left clean"
"$py" "$here/check_guest.py" "$url" "$results"
lap "checks"

if [ "${XTALK_GUEST_KEEP:-0}" != 1 ]; then
    qpid=$(cat "$cache/guest-run/qemu.pid")
    "$here/guest.sh" down
    trap - EXIT INT TERM
    if kill -0 "$qpid" 2>/dev/null; then die "qemu $qpid still running after the guest went down"; fi
    say "qemu $qpid gone"
    lap "guest down"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$timings"
say "guest test done in $(( $(date +%s) - t0 )) s: $results (compare: $results/compare/compare.md)"
