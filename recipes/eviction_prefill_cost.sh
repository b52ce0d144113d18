#!/usr/bin/env bash
# Prefill time of each eviction method relative to uncompressed prefill (kvc-generate --stats-json
# prefill_seconds, median of REPEATS runs) on a ~1000-token prompt for kvc-tiny-lm at ratio 0.5.
# Writes data/results/eviction/prefill_cost.csv. Timings share the machine: compare within one run.
# Usage: recipes/eviction_prefill_cost.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build}/bin
OUT=${2:-$ROOT/data/results/eviction}
PROMPT=${PROMPT:-$ROOT/data/text/wikitext2/wiki.test.raw}
REPEATS=${REPEATS:-5}
PRESSES=${PRESSES:-"none streaming_llm h2o tova snapkv pyramidkv knorm random dynamickv d2o kvcompose kvcompose_unstructured ada"}
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then REPEATS=1; PRESSES="none snapkv"; fi
# Measured on kvc-tiny-lm (2.4M parameters, from ../shared: scripts/model_path.sh); the smoke run uses the
# repository's kvc-micro-lm.
. "$ROOT/recipes/lib/needle_model.sh"
. "$ROOT/recipes/lib/committed_settings.sh"  # dynamickv and kvcompose* run the settings of the committed results
MODEL=$(needle_model)

mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
head -c 2400 "$PROMPT" > "$TMP/prompt.txt"
echo "press,prompt_tokens,prefill_seconds_median,relative_to_none" > "$OUT/prefill_cost.csv"
base=""
for press in $PRESSES; do
  ratio=0.5; [ "$press" = none ] && ratio=0
  for i in $(seq "$REPEATS"); do
    "$BIN/kvc-generate" -m "$MODEL" --prompt-file "$TMP/prompt.txt" --press "$(press_spec "$press")" --ratio "$ratio" -n 1 -q \
      -t "${THREADS:-1}" --stats-json "$TMP/$press.$i.json" 2>/dev/null
  done
  line=$(python3 - "$TMP" "$press" "$REPEATS" "$base" <<'PY'
import json, statistics, sys
tmp, press, n, base = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
runs = [json.load(open(f"{tmp}/{press}.{i}.json")) for i in range(1, n + 1)]
med = statistics.median(r["prefill_seconds"] for r in runs)
rel = med / float(base) if base else 1.0
print(f"{press},{runs[0]['prompt_tokens']},{med:.5f},{rel:.3f}")
PY
)
  echo "$line" >> "$OUT/prefill_cost.csv"
  [ "$press" = none ] && base=$(echo "$line" | cut -d, -f3)
done
cat "$OUT/prefill_cost.csv"
