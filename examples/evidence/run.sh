#!/usr/bin/env bash
# The evidence example end to end (`make evidence`): run the two experiments, then bundle them.
#   examples/evidence/run.sh [BUNDLE]        default BUNDLE: results/evidence-example-<date>
# The experiments' results go beside it, in BUNDLE-runs/. XTALK: the xtalk command (default
# `xtalk`); XTALK_EVIDENCE_KEY: an SSH private key that signs the bundle (unsigned without).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
xtalk=${XTALK:-xtalk}
bundle=${1:-results/evidence-example-$(date -u +%Y%m%d-%H%M%S)}
runs="$bundle-runs"
inputs=()
for exp in characterize final; do
    rc=0
    $xtalk run "$here/$exp.toml" --results "$runs/$exp" || rc=$?
    # 4: some runs did not complete; the bundle says which (its deviations). Anything else stops.
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 4 ]; then exit "$rc"; fi
    inputs+=("$(ls -d "$runs/$exp"/*/ | head -n 1)")
done
sign=()
if [ -n "${XTALK_EVIDENCE_KEY:-}" ]; then sign=(--key "$XTALK_EVIDENCE_KEY"); fi
$xtalk evidence "${inputs[@]}" --out "$bundle" "${sign[@]}" --n-boot "${XTALK_EVIDENCE_N_BOOT:-2000}"
echo "bundle: $bundle (check it: xtalk evidence verify $bundle; replay it: xtalk evidence replay $bundle)"
