#!/usr/bin/env bash
# One CI job of xtalk (docs/ci.md): run the experiment, gate its results on the ε bounds and,
# when a baseline is kept, on regressions against it; keep the verdict documents.
#
#   examples/ci/xtalk-ci.sh EXPERIMENT.toml OUT_DIR [BASELINE_DIR]
#
# Environment: XTALK (the xtalk command, default `xtalk`), XTALK_EPSILON (ε bounds, space
# separated, e.g. "response:p99:3x"), XTALK_MAX_REGRESSION (default 10%), XTALK_STRICT=1
# (inconclusive checks fail too), XTALK_RUN_ARGS (extra `xtalk run` options), XTALK_PROMOTE=1
# (when the gate passed, these results become BASELINE_DIR: do it on the main branch only).
# Exit status: the gate's (0 passed, 1 failed, 2 bad input), or xtalk run's when runs failed.
set -euo pipefail
experiment=${1:?experiment file}; out=${2:?output directory}; baseline=${3:-}
xtalk=${XTALK:-xtalk}
mkdir -p "$out"
# shellcheck disable=SC2086  # XTALK_RUN_ARGS is a list of options
"$xtalk" run "$experiment" --results "$out/results" ${XTALK_RUN_ARGS:-} | tee "$out/run.txt"
results=$(ls -d "$out"/results/*/ | tail -n 1)
args=()
for e in ${XTALK_EPSILON:-}; do args+=(-e "$e"); done
if [ -n "$baseline" ] && [ -d "$baseline/runs" ]; then
  args+=(--baseline "$baseline" --max-regression "${XTALK_MAX_REGRESSION:-10%}")
  "$xtalk" compare "$baseline" "$results" --label baseline --label current --out "$out/compare" --json > "$out/compare.json"
fi
[ "${XTALK_STRICT:-0}" = 1 ] && args+=(--strict)
set +e
"$xtalk" gate "$results" "${args[@]}" --junit "$out/gate.xml" 2>&1 | tee "$out/gate.txt"
code=${PIPESTATUS[0]}
set -e
echo "results: $results; gate exit $code; verdicts: $out/gate.xml, $out/gate.txt"
if [ "$code" = 0 ] && [ "${XTALK_PROMOTE:-0}" = 1 ] && [ -n "$baseline" ]; then
  # Replaced whole or not at all: a copy beside it, then two renames.
  rm -rf "$baseline.new" "$baseline.old"
  cp -a "$results" "$baseline.new"
  [ -e "$baseline" ] && mv "$baseline" "$baseline.old"
  mv "$baseline.new" "$baseline" && rm -rf "$baseline.old"
  echo "baseline: $baseline is now $results"
fi
exit "$code"
