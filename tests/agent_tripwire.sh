#!/bin/sh
# Stands in for xtalk-agent during tests not marked `agent` (see conftest.py): records who
# called it and refuses, so such a test fails instead of silently driving the agent.
echo "$PYTEST_CURRENT_TEST: xtalk-agent $*" >>"${XTALK_TRIPWIRE_LOG:-/dev/null}"
echo "xtalk-agent: called from a test not marked agent (tests/conftest.py: AGENT_MODULES)" >&2
exit 97
