#!/usr/bin/env bash
# The agent-driven `hostile` tests on a machine that has only cgroup v2, the way a modern
# distribution or a container sees it: a private mount namespace (nothing leaks to the host's
# mounts, and it vanishes with its last process) in which /sys/fs/cgroup is a lone cgroup2
# mount. The v2 hierarchy offers only the controllers no v1 hierarchy holds on this machine,
# so configurations that need the v1 cpu controller (RT group scheduling) or v2 controllers
# that are not offered must skip or be refused with the reason. Usage (root):
#   tests/hostile/cgroup2_only.sh [pytest args...]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root cgroup2_only
command -v unshare >/dev/null || { echo "cgroup2_only: needs unshare (util-linux)" >&2; exit 2; }
trap recover EXIT
cd "$ROOT"
# --propagation private: the unmounts and the mount below stay inside the namespace.
unshare -m --propagation private -- bash -euo pipefail -c '
  umount -R /sys/fs/cgroup
  mount -t cgroup2 cgroup2 /sys/fs/cgroup
  echo "cgroup2_only: /sys/fs/cgroup is cgroup2 only (controllers: $(cat /sys/fs/cgroup/cgroup.controllers))"
  exec "$@"
' cgroup2_only "${PYTEST[@]}" "$@" &
# In the background so that an interrupt reaches the tests at once (bash runs traps only
# between commands); unshare execs, so $! is the tests' own process.
child=$!
trap 'kill -TERM "$child" 2>/dev/null || true; wait "$child" || true; exit 130' INT TERM
wait "$child"
