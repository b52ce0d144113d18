#!/usr/bin/env bash
# What the attention statistics cost at prefill: each method that scores entries from prefill attention
# (column sums or the last queries' probabilities) against uncompressed prefill and against
# StreamingLLM (the same kept bytes, no statistics), on the 134M random-weight Llama (llama-125m
# preset, 16K context) at each of CONTEXTS prompt tokens, ratio RATIO. Each prefill is the fastest of
# REPEATS kvc-generate runs (--stats-json prefill_seconds); all in one run, so ratios are same-run.
# Writes OUT/prefill_statistics_cost.csv. Timings need an otherwise idle machine.
# Usage: BUILD=build THREADS=2 recipes/prefill_statistics_cost.sh [OUT_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=${1:-$ROOT/data/results/eviction}
CONTEXTS=${CONTEXTS:-"2048 8192"}
RATIO=${RATIO:-0.9}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
MODEL=${MODEL:-/tmp/kvc-llama-125m-16k}
PRESSES=${PRESSES:-"none streaming_llm snapkv pyramidkv dynamickv ada kvcompose h2o tova d2o"}
SHAPE=(--preset llama-125m --context 16384)
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes, on a small model of its own.
if [ -n "${KVC_SMOKE:-}" ]; then
  CONTEXTS=256; REPEATS=1; PRESSES="none streaming_llm snapkv h2o d2o"; MODEL=${MODEL_SMOKE:-}
  SHAPE=(--hidden 256 --layers 4 --heads 8 --kv-heads 2 --intermediate 512 --context 1024)
fi

mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[ -n "$MODEL" ] || MODEL=$TMP/model  # the smoke run's model lives and dies with the run
# The same checkpoint as recipes/eviction_decode_speedup.sh.
source "$ROOT/recipes/lib/bench_tokenizer.sh"
. "$ROOT/recipes/lib/committed_settings.sh"  # dynamickv and kvcompose* run the settings of the committed results
if [ ! -f "$MODEL/config.json" ]; then
  "$BUILD/bin/kvc-make-checkpoint" "${SHAPE[@]}" "${VOCAB[@]}" --tokenizer "$TOKENIZER" -o "$MODEL"
fi
cat "$ROOT"/data/text/pg_essays/*.txt > "$TMP/prompt.txt"  # ~175K tokens; --prompt-tokens takes the first N
for context in $CONTEXTS; do
  for press in $PRESSES; do
    ratio=$RATIO; [ "$press" = none ] && ratio=0
    for i in $(seq "$REPEATS"); do
      echo "prefill_statistics_cost: $press ratio=$ratio context=$context run $i/$REPEATS" >&2
      "$BUILD/bin/kvc-generate" -m "$MODEL" --prompt-file "$TMP/prompt.txt" --prompt-tokens "$context" -n 1 \
        --ignore-eos -q -t "$THREADS" --press "$(press_spec "$press")" --ratio "$ratio" --stats-json "$TMP/$context.$press.$i.json"
    done
  done
done
python3 - "$TMP" "$OUT/prefill_statistics_cost.csv" "$RATIO" "$REPEATS" "$CONTEXTS" $PRESSES <<'PY'
import json, sys
tmp, csv, ratio, repeats, contexts, presses = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split(), sys.argv[6:]
with open(csv, "w") as f:
    f.write("context,press,ratio,threads,prefill_s_best,vs_uncompressed,vs_streaming_llm\n")
    for c in contexts:
        best = {p: min(json.load(open(f"{tmp}/{c}.{p}.{i}.json"))["prefill_seconds"] for i in range(1, repeats + 1))
                for p in presses}
        threads = json.load(open(f"{tmp}/{c}.{presses[0]}.1.json"))["threads"]
        for p in presses:
            vs_stream = f"{best[p] / best['streaming_llm']:.3f}" if "streaming_llm" in best else ""
            f.write(f"{c},{p},{0 if p == 'none' else ratio},{threads},{best[p]:.3f},{best[p] / best['none']:.3f},{vs_stream}\n")
PY
cat "$OUT/prefill_statistics_cost.csv"
