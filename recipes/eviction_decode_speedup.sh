#!/usr/bin/env bash
# Decode speedup from a smaller cache at long context: a random-weight 134M Llama (llama-125m preset,
# 16K context) prefills exactly CONTEXT prompt tokens (essays from data/text, --prompt-tokens) and
# decodes NEW tokens greedily, uncompressed and with each bounded/prefill press at RATIO. Writes OUT/
# decode_speedup.csv: decode tok/s, speedup vs uncompressed, prefill seconds, prefill cost ratio vs
# uncompressed, resident KV bytes after decoding, and the bytes a decode step streams (weights and the
# cache's step reads) with the speed-up they allow (uncompressed over compressed). Timings need an
# otherwise idle machine; the bytes do not.
# REPEATS=N runs every press N times, the presses in turn within each repeat (a noisy machine drifts
# between runs): decode_speedup.csv then holds medians (of tok/s and prefill seconds, and of each
# repeat's ratios to that repeat's uncompressed run), and OUT/decode_speedup_runs.csv every run.
# Usage: BUILD=build CONTEXT=8192 THREADS=2 [REPEATS=5 NEW=64] recipes/eviction_decode_speedup.sh [OUT_DIR]
#   (OUT_DIR default: data/results/eviction/decode_speedup/<CONTEXT/1024>k, e.g. .../8k)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
CONTEXT=${CONTEXT:-8192}
OUT=${1:-$ROOT/data/results/eviction/decode_speedup/$((CONTEXT / 1024))k}
NEW=${NEW:-32}
RATIO=${RATIO:-0.9}
REPEATS=${REPEATS:-1}
THREADS=${THREADS:-2}
MODEL=${MODEL:-/tmp/kvc-llama-125m-16k}
source "$ROOT/recipes/lib/bench_tokenizer.sh"
. "$ROOT/recipes/lib/committed_settings.sh"  # dynamickv and kvcompose* run the settings of the committed results
PRESSES=${PRESSES:-"none streaming_llm h2o tova snapkv d2o kvcompose"}
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then CONTEXT=256; NEW=4; PRESSES="none snapkv"; MODEL=${MODEL_SMOKE:-/tmp/kvc-smoke-llama}; fi

if [ ! -f "$MODEL/config.json" ]; then
  "$BUILD/bin/kvc-make-checkpoint" --preset llama-125m --context 16384 "${VOCAB[@]}" --tokenizer "$TOKENIZER" -o "$MODEL"
fi
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Enough English text for CONTEXT tokens (~4 characters per Llama-2 token; 6 leaves margin).
cat "$ROOT"/data/text/pg_essays/*.txt > "$TMP/all.txt"  # 0.7 MB: ~175K tokens
head -c $((CONTEXT * 6)) "$TMP/all.txt" > "$TMP/prompt.txt"
for repeat in $(seq "$REPEATS"); do
  for press in $PRESSES; do
    ratio=$RATIO; [ "$press" = none ] && ratio=0
    echo "eviction_decode_speedup: $press ratio=$ratio context=$CONTEXT (run $repeat of $REPEATS)" >&2
    "$BUILD/bin/kvc-generate" -m "$MODEL" --prompt-file "$TMP/prompt.txt" --prompt-tokens "$CONTEXT" \
      -n "$NEW" --ignore-eos -q -t "$THREADS" --press "$(press_spec "$press")" --ratio "$ratio" --stats-json "$TMP/$press.$repeat.json"
  done
done
python3 - "$TMP" "$OUT" "$CONTEXT" "$RATIO" "$REPEATS" $PRESSES <<'PY'
import json, statistics, sys
tmp, out, context, ratio, repeats, presses = (sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]),
                                              sys.argv[6:])
runs = {p: [json.load(open(f"{tmp}/{p}.{k}.json")) for k in range(1, repeats + 1)] for p in presses}
base = runs["none"]
median = statistics.median
tok_s = lambda r: r["decode_tokens_per_second"]
step = lambda r: r["weight_bytes"] + r["kv_step_read_bytes"]
with open(f"{out}/decode_speedup.csv", "w") as f, open(f"{out}/decode_speedup_runs.csv", "w") as every:
    f.write("press,ratio,prompt_tokens,generated_tokens,threads,decode_tok_s,decode_speedup,prefill_s,"
            "prefill_cost_ratio,kv_resident_bytes,kv_resident_share,step_read_bytes,limit\n")
    every.write("press,repeat,decode_tok_s,decode_speedup,prefill_s\n")
    for p, rs in runs.items():
        speedups = [tok_s(r) / tok_s(b) for r, b in zip(rs, base)]
        costs = [r["prefill_seconds"] / b["prefill_seconds"] for r, b in zip(rs, base)]
        for k, (r, speedup) in enumerate(zip(rs, speedups), 1):
            every.write(f"{p},{k},{tok_s(r):.3f},{speedup:.3f},{r['prefill_seconds']:.3f}\n")
        r, b = rs[0], base[0]
        f.write(f"{p},{0 if p == 'none' else ratio},{r['prompt_tokens']},{r['generated_tokens']},{r['threads']},"
                f"{median(map(tok_s, rs)):.3f},{median(speedups):.3f},"
                f"{median(x['prefill_seconds'] for x in rs):.3f},{median(costs):.3f},"
                f"{r['kv_resident_bytes']},{r['kv_resident_bytes'] / b['kv_resident_bytes']:.4f},"
                f"{step(r)},{step(b) / step(r):.3f}\n")
PY
cat "$OUT/decode_speedup.csv"
