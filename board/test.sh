#!/bin/sh
# End to end on the emulated board (`make board-test`): boot it (or reuse it), ship the aarch64
# agent, then through the SSH target: the board's facts (`xtalk sysinfo`'s table), the
# quickstart as a campaign (board/campaigns/quickstart.toml) and an example campaign; the
# reports made here; board/check_board.py checks runs, job rows, counters and cleanup.
# The board is shut down at the end (XTALK_BOARD_KEEP=1 leaves it up).
#
#   board/test.sh [stock|rt]     the kernel to boot (default stock)
#
# Results: CACHE/results/KERNEL/ (CACHE: XTALK_BOARD_DIR, default build/board).
# XTALK_BOARD_CAMPAIGNS: the campaign files (default: the quickstart and examples/bessad-contention.toml).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/common.sh"
cache=$(board_dir)
kernel=${1:-stock}
case $kernel in stock|rt) ;; *) die "kernel '$kernel': write stock or rt" ;; esac
py="$repo/.venv/bin/python"; xtalk="$repo/.venv/bin/xtalk"
agent="$repo/agent/target/aarch64-unknown-linux-musl/release/xtalk-agent"
[ -x "$xtalk" ] || die "no .venv here: run 'make setup'"
[ -x "$agent" ] || die "no aarch64 agent: run 'make agent-aarch64'"
campaigns=${XTALK_BOARD_CAMPAIGNS:-"$here/campaigns/quickstart.toml $repo/examples/bessad-contention.toml"}
results="$cache/results/$kernel"
t0=$(date +%s)
lap() { say "  ($(( $(date +%s) - t0 )) s so far)"; }

[ "${XTALK_BOARD_KEEP:-0}" = 1 ] || trap '"$here/board.sh" down' EXIT INT TERM
"$here/board.sh" up "$kernel"
lap

step "shipping the aarch64 agent (cached on the board by its hash)"
digest=$(sha256sum "$agent" | cut -c1-16)
remote="/root/.cache/xtalk/xtalk-agent-aarch64-$digest"
if "$here/board.sh" ssh "test -x $remote"; then
    say "agent $digest already on the board"
else
    "$here/board.sh" ssh "mkdir -p /root/.cache/xtalk && cat > $remote.tmp && chmod 755 $remote.tmp && mv $remote.tmp $remote" < "$agent"
    say "agent $digest copied ($(stat -c %s "$agent") bytes)"
fi
elf=$("$here/board.sh" ssh "od -An -tx1 -j18 -N2 $remote | tr -d ' '; uname -m")
[ "$elf" = "$(printf 'b700\naarch64')" ] || die "the agent on the board is not an aarch64 ELF for an aarch64 board: $elf"
say "agent on the board: an aarch64 ELF (e_machine 0xb7), board uname -m aarch64"
url="$("$here/board.sh" url)&agent=$remote"
lap

step "xtalk sysinfo of the board (through the SSH target)"
mkdir -p "$results"
"$py" - "$url" "$results/sysinfo.json" <<'PY'
import json, sys
from rich.console import Console
from xtalk.report.sysinfo import show
from xtalk.targets.ssh import SshTarget
env = SshTarget.from_url(sys.argv[1]).facts().environment
open(sys.argv[2], "w").write(json.dumps(env, indent=2))
show(env, Console())
PY
lap

stores=""
for f in $campaigns; do
    step "campaign $(basename "$f") on the board"
    "$xtalk" campaign run "$f" --results "$results" --target "$url"
    store=$(ls -dt "$results"/*/ | head -1); store=${store%/}
    lap
    step "report of $(basename "$store") (made here)"
    "$xtalk" report "$store"
    stores="$stores $store"
    lap
done

step "checks: architecture, run.json, job rows, counters, the board left clean"
"$py" "$here/check_board.py" "$url" $stores
lap
