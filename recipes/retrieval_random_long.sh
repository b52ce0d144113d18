#!/bin/sh
# Clustered KV retrieval on a random-weight Llama, decoded far longer than kvc-tiny-lm allows:
# a 64-token prompt and thousands of generated tokens, adaptive vs static vs local vs no
# clustering in one run (same tokens, same entry budget). The checkpoint is made here with
# kvc-make-checkpoint: 2 layers, hidden 128, 4 query / 2 KV heads of 32, context 8192, weights of
# std 0.15 (at the default 0.02 every attention is near uniform, so recall says nothing), and
# kvc-micro-lm's tokenizer for the prompt text.
# Usage: recipes/retrieval_random_long.sh [BUILD_DIR] [OUT_DIR] [STEPS]   (from the repository root)
set -eu
BUILD=${1:-build}
OUT=${2:-data/results/retrieval/random_long}
STEPS=${3:-6000}
THREADS=${THREADS:-1}
BUDGET=${BUDGET:-128}
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then STEPS=40; fi

PROMPT=data/text/pg_essays/addiction.txt
MODEL=${MODEL:-/tmp/kvc-random-llama-2l}
mkdir -p "$OUT"

"$BUILD/bin/kvc-make-checkpoint" --hidden 128 --intermediate 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 32 \
  --vocab 2048 --context 8192 --init-std 0.15 --seed 0 --tokenizer data/models/kvc-micro-lm/tokenizer.model \
  -o "$MODEL"

# Per-head thresholds τ_h from the prompt's clusters, stored in the index; the replay reads them back.
"$BUILD/bin/kvc-cluster" build --threads "$THREADS" -m "$MODEL" -f $PROMPT --prompt-tokens 64 -s adaptive \
  --store "$OUT/calibration.kvs" --index "$OUT/calibration.safetensors" --json > "$OUT/calibration.json"

"$BUILD/bin/kvc-cluster" replay --threads "$THREADS" -m "$MODEL" -f $PROMPT --prompt-tokens 64 -n "$STEPS" \
  --index "$OUT/calibration.safetensors" \
  -s adaptive:budget=$BUDGET,label=adaptive -s static:budget=$BUDGET,label=static \
  -s local:budget=$BUDGET,label=local -s none:budget=$BUDGET,label=none --out-dir "$OUT" --plot
# Stores are scratch: what the replay needs from the index is its thresholds (as in the main recipe).
rm -f "$OUT"/store-*.kvs "$OUT/calibration.kvs"
