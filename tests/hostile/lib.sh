# Shared by the hostile-environment scripts: where the checkout is, the test command they run
# (the `hostile` subset of the agent-driven tests, each skip with its reason) and the clean-up
# that runs whatever happens.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PYTEST=("$ROOT/.venv/bin/python" -m pytest -q -rs -p no:cacheprovider -m "agent and hostile")
AGENT="$ROOT/agent/target/release/xtalk-agent"

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "$1: needs root (it mounts, or moves itself between cgroups); nothing done" >&2
    exit 2
  fi
  [ -x "$AGENT" ] && [ -x "$ROOT/.venv/bin/python" ] || { echo "$1: run make setup first" >&2; exit 2; }
}

# Whatever the tests left when interrupted: the agent's own recovery undoes a killed run's
# journalled changes (cgroups, policies, trace instances).
recover() {
  "$AGENT" recover >/dev/null 2>&1 || true
}
