#!/usr/bin/env bash
# Decode speed-up of the bounded eviction methods at long context, measured step by step in turn: the
# 134M random Llama of recipes/eviction_decode_speedup.sh prefills the same CONTEXT random tokens into
# an uncompressed cache and into a cache per press at RATIO (kvc-bench --presses), then each of NEW decode
# rounds runs one greedy step in every cache in turn. A drift of the machine's memory bandwidth between
# runs (±25% on a shared VM) would otherwise swamp the ratios; here it slows every cache alike.
# REPEATS=N runs the whole comparison N times. Writes OUT/decode_interleaved.csv (every repeat: decode
# tok/s, speed-up over the uncompressed cache, the byte limit) and OUT/decode_interleaved_medians.csv.
# Usage: BUILD=build [CONTEXT=8192 NEW=128 RATIO=0.9 REPEATS=3 THREADS=2] recipes/eviction_decode_interleaved.sh [OUT_DIR]
#   (OUT_DIR default: data/results/eviction/decode_speedup/<CONTEXT/1024>k_interleaved, e.g. .../8k_interleaved)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
CONTEXT=${CONTEXT:-8192}
OUT=${1:-$ROOT/data/results/eviction/decode_speedup/$((CONTEXT / 1024))k_interleaved}
NEW=${NEW:-128}
RATIO=${RATIO:-0.9}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
MODEL=${MODEL:-/tmp/kvc-llama-125m-16k}
source "$ROOT/recipes/lib/bench_tokenizer.sh"
PRESSES=${PRESSES:-"none,streaming_llm,h2o,tova,d2o"}
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then CONTEXT=256; NEW=4; REPEATS=1; PRESSES="none,h2o"; MODEL=${MODEL_SMOKE:-/tmp/kvc-smoke-llama}; OUT=$(mktemp -d); fi

if [ ! -f "$MODEL/config.json" ]; then
  "$BUILD/bin/kvc-make-checkpoint" --preset llama-125m --context 16384 "${VOCAB[@]}" --tokenizer "$TOKENIZER" -o "$MODEL"
fi
mkdir -p "$OUT"
for repeat in $(seq "$REPEATS"); do
  echo "eviction_decode_interleaved: $PRESSES at ratio $RATIO, context $CONTEXT (run $repeat of $REPEATS)" >&2
  "$BUILD/bin/kvc-bench" -m "$MODEL" -t "$THREADS" --contexts "$CONTEXT" --decode-tokens "$NEW" --presses "$PRESSES" \
    --ratio "$RATIO" --json-out "$OUT/run$repeat.json" >&2
done
python3 - "$OUT" "$REPEATS" <<'PY'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
runs = [json.load(open(f"{out}/run{k}.json")) for k in range(1, repeats + 1)]
with open(f"{out}/decode_interleaved.csv", "w") as f:
    f.write("press,repeat,ratio,prompt_tokens,steps,decode_tok_s,decode_speedup,limit,kv_resident_bytes\n")
    for k, r in enumerate(runs, 1):
        for p in r["runs"]:
            f.write(f"{p['press']},{k},{p['ratio']},{r['prompt_tokens']},{r['steps']},{p['decode_tokens_per_second']:.3f},"
                    f"{p['decode_speedup']:.3f},{p['limit']:.3f},{p['kv_resident_bytes']}\n")
with open(f"{out}/decode_interleaved_medians.csv", "w") as f:
    f.write("press,decode_tok_s,decode_speedup,lowest,highest,limit\n")
    for i, p in enumerate(runs[0]["runs"]):
        speedups = [r["runs"][i]["decode_speedup"] for r in runs]
        f.write(f"{p['press']},{statistics.median(r['runs'][i]['decode_tokens_per_second'] for r in runs):.3f},"
                f"{statistics.median(speedups):.3f},{min(speedups):.3f},{max(speedups):.3f},{p['limit']:.3f}\n")
PY
cat "$OUT/decode_interleaved_medians.csv"
