#!/usr/bin/env bash
# Clustered retrieval at a real model's shape: the 1-layer Llama-2-7B-shaped random checkpoint
# (kvc-make-checkpoint --preset llama2-7b-1layer: 32 KV heads of 128; context raised to 32K, plus 1K
# to decode in) prefills CONTEXTS prompt tokens of English text and decodes NEW tokens, with the full
# cache and with --retrieval STRATEGIES. Writes OUT/at_scale.csv: prefill seconds, seconds spent
# clustering the prompt, per-step time choosing clusters and placing the new entry, decode tok/s, bytes
# and reads from storage per step, and RAM held against the full cache. Timings need an otherwise idle
# machine.
# Usage: BUILD=build CONTEXTS="8192 16384 32768" NEW=32 THREADS=2 recipes/retrieval_at_scale.sh [OUT_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=${1:-$ROOT/data/results/retrieval}
CONTEXTS=${CONTEXTS:-"8192 16384 32768"}
NEW=${NEW:-32}
THREADS=${THREADS:-2}
STRATEGIES=${STRATEGIES:-"adaptive static adaptive:tails=storage"}
MODEL=${MODEL:-/tmp/kvc-llama2-7b-1layer-33k}
SHAPE=(--preset llama2-7b-1layer --context 33792)
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then
  CONTEXTS=300; NEW=4; MODEL=${MODEL_SMOKE:-/tmp/kvc-smoke-7b-shape}
  SHAPE+=(--hidden 256 --intermediate 512 --heads 2 --kv-heads 2)
fi

if [ ! -f "$MODEL/config.json" ]; then
  # kvc-micro-lm's tokenizer (vocabulary 2048) only turns the text into ids: the weights are random.
  "$BUILD/bin/kvc-make-checkpoint" "${SHAPE[@]}" --vocab 2048 \
    --tokenizer "$ROOT/data/models/kvc-micro-lm/tokenizer.model" -o "$MODEL"
fi
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for context in $CONTEXTS; do
  for run in full $STRATEGIES; do
    echo "retrieval_at_scale: $run, $context tokens" >&2
    flags=()
    [ "$run" != full ] && flags=(--retrieval "$run")
    "$BUILD/bin/kvc-generate" -m "$MODEL" -f "$ROOT/data/text/wikitext2/wiki.test.raw" --prompt-tokens "$context" \
      -n "$NEW" --ignore-eos -q -t "$THREADS" "${flags[@]}" --json-out "$TMP/$run-$context.json"
  done
done
python3 - "$TMP" "$OUT/at_scale.csv" "$CONTEXTS" full $STRATEGIES <<'PY'
import json, sys
tmp, csv, contexts, runs = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4:]
with open(csv, "w") as f:
    f.write("context,cache,prefill_s,cluster_s,decode_tok_s,decode_vs_full,choose_ms_per_step,place_ms_per_step,"
            "read_bytes_per_step,reads_per_step,resident_bytes,full_cache_bytes,resident_share\n")
    for context in contexts:
        full = json.load(open(f"{tmp}/full-{context}.json"))
        for run in runs:
            r = json.load(open(f"{tmp}/{run}-{context}.json"))
            c = r.get("cache_report", {})
            steps = max(1, c.get("decode_steps", 1))
            f.write(f"{context},{run},{r['prefill_seconds']:.3f},{c.get('cluster_seconds', 0):.3f},"
                    f"{r['decode_tokens_per_second']:.3f},"
                    f"{r['decode_tokens_per_second'] / full['decode_tokens_per_second']:.3f},"
                    f"{1e3 * c.get('select_seconds', 0) / steps:.3f},{1e3 * c.get('update_seconds', 0) / steps:.3f},"
                    f"{c.get('read_bytes', 0) / steps:.0f},{c.get('read_ops', 0) / steps:.1f},"
                    f"{r['kv_resident_bytes']},{full['kv_resident_bytes']},"
                    f"{r['kv_resident_bytes'] / full['kv_resident_bytes']:.4f}\n")
PY
cat "$OUT/at_scale.csv"
