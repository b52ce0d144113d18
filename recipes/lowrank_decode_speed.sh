#!/usr/bin/env bash
# Decode speed of the low-rank cache against the full cache at long context: a random-weight 134M Llama
# (llama-125m preset, 16K context, d_kv 768) prefills exactly CONTEXT prompt tokens (essays from
# data/text) and decodes NEW tokens greedily with the full cache and with low-rank caches: fixed rank
# d_kv/4 with pre-RoPE keys (the paper's form: keys rebuilt and rotated every step) and with keys in a
# rotated basis (keys=rotated: scored in the latent), fixed rank d_kv/8 rotated, and adaptive ranks from
# gates trained briefly on this model (pre-RoPE and rotated keys; rotated also with the gate read in f16,
# gate=f16). Bases come from kvc-calibrate on the essays. Writes OUT/decode_speed.csv: decode tok/s,
# ratio to the full cache in the same run, prefill seconds, resident KV bytes, kept share of the payload,
# and the bytes a decode step streams (weights, payload, the cache's gates and basis rows) with the
# speed-up they allow (the full cache's bytes over the cache's). Timings need an otherwise idle machine;
# the bytes do not.
# Also OUT/decode_op_counts.csv: ATen operator calls per decode step of each cache (kvc-generate
# --count-ops, OPS_CONTEXT prompt tokens, 16 steps), a count that is the same on a busy machine.
# REPEATS=N runs every cache N times, the caches in turn within each repeat (a noisy machine drifts
# between runs): decode_speed.csv then holds medians (of tok/s, and of each repeat's ratio to that
# repeat's full cache), and OUT/decode_speed_runs.csv every run.
# Usage: BUILD=build CONTEXTS="2048 8192" THREADS=2 [REPEATS=5 NEW=64] recipes/lowrank_decode_speed.sh [OUT_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=${1:-$ROOT/data/results/lowrank}
CONTEXTS=${CONTEXTS:-"2048 8192"}
NEW=${NEW:-32}
REPEATS=${REPEATS:-1}
THREADS=${THREADS:-2}
TRAIN_STEPS=${TRAIN_STEPS:-20}
MODEL=${MODEL:-/tmp/kvc-llama-125m-16k}
source "$ROOT/recipes/lib/bench_tokenizer.sh"
CALIBRATION_TOKENS=8192
OPS_CONTEXT=512
SHAPE=(--preset llama-125m --context 16384)
BISECT=8
SHARE_TOKENS=1024
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes, on a 2-layer model.
if [ -n "${KVC_SMOKE:-}" ]; then
  CONTEXTS=256; NEW=4; TRAIN_STEPS=1; CALIBRATION_TOKENS=512; OUT=$(mktemp -d)
  SHAPE=(--hidden 256 --intermediate 688 --layers 2 --heads 4 --kv-heads 4 --context 2048)
  MODEL=${MODEL_SMOKE:-/tmp/kvc-smoke-llama-2layer}; OPS_CONTEXT=128; BISECT=2; SHARE_TOKENS=256
fi

if [ ! -f "$MODEL/config.json" ]; then
  "$BUILD/bin/kvc-make-checkpoint" "${SHAPE[@]}" "${VOCAB[@]}" --tokenizer "$TOKENIZER" -o "$MODEL"
fi
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat "$ROOT"/data/text/pg_essays/*.txt > "$TMP/all.txt"  # 0.7 MB: ~175K tokens
"$BUILD/bin/kvc-calibrate" -m "$MODEL" -t "$THREADS" -f "$TMP/all.txt" --tokens "$CALIBRATION_TOKENS" -c 1024 \
  -o "$TMP/bases.safetensors" >&2
"$BUILD/bin/kvc-train" -m "$MODEL" -t "$THREADS" --bases "$TMP/bases.safetensors" -f "$TMP/all.txt" \
  --steps "$TRAIN_STEPS" -c 128 --batch 2 --eval-every 0 -o "$TMP/gates.safetensors" >&2
DKV=$(python3 -c "import json; c = json.load(open('$MODEL/config.json')); \
print(c.get('num_key_value_heads', c['num_attention_heads']) * c['hidden_size'] // c['num_attention_heads'])")
B=$TMP/bases.safetensors G=$TMP/gates.safetensors

# The gates' threshold τ, bisected on a short prompt until they keep the share of the fixed rank d_kv/4,
# so that adaptive and fixed ranks are timed at the same memory.
head -c 6000 "$TMP/all.txt" > "$TMP/short.txt"
kept_share() {  # kept share of the fp32 payload with --lowrank "$G:tau=$1" on SHARE_TOKENS prompt tokens
  "$BUILD/bin/kvc-generate" -m "$MODEL" --prompt-file "$TMP/short.txt" --prompt-tokens "$SHARE_TOKENS" -n 1 --ignore-eos -q \
    -t "$THREADS" --lowrank "$G:tau=$1" --stats-json "$TMP/share.json" > /dev/null 2>&1
  python3 -c "import json; c = json.load(open('$MODEL/config.json')); r = json.load(open('$TMP/share.json')); \
print(r['kv_payload_bytes'] / (r['kv_entries'] * c['hidden_size'] // c['num_attention_heads'] * 2 * 4))"
}
lo=0.01 hi=0.99
for _ in $(seq "$BISECT"); do
  mid=$(python3 -c "print(($lo + $hi) / 2)")
  if python3 -c "import sys; sys.exit(0 if $(kept_share "$mid") > 0.25 else 1)"; then lo=$mid; else hi=$mid; fi
done
TAU=$hi
echo "lowrank_decode_speed: gates at tau=$TAU keep $(kept_share "$TAU") of the cache" >&2

CACHES=(
  "none|"
  "pre-rope d_kv/4|--lowrank $B --rank $((DKV / 4))"
  "rotated d_kv/4|--lowrank $B:keys=rotated --rank $((DKV / 4))"
  "rotated d_kv/8|--lowrank $B:keys=rotated --rank $((DKV / 8))"
  "adaptive pre-rope|--lowrank $G:tau=$TAU"
  "adaptive rotated|--lowrank $G:tau=$TAU,keys=rotated"
  "adaptive rotated f16 gate|--lowrank $G:tau=$TAU,keys=rotated,gate=f16"
)
for repeat in $(seq "$REPEATS"); do
  for context in $CONTEXTS; do
    head -c $((context * 6)) "$TMP/all.txt" > "$TMP/prompt.txt"  # ~4 characters per token; 6 leaves margin
    for i in "${!CACHES[@]}"; do
      name=${CACHES[$i]%%|*} args=${CACHES[$i]#*|}
      echo "lowrank_decode_speed: $name context=$context (run $repeat of $REPEATS)" >&2
      # shellcheck disable=SC2086
      "$BUILD/bin/kvc-generate" -m "$MODEL" --prompt-file "$TMP/prompt.txt" --prompt-tokens "$context" -n "$NEW" \
        --ignore-eos -q -t "$THREADS" $args --stats-json "$TMP/$context.$i.$repeat.json"
    done
  done
done
python3 - "$TMP" "$OUT" "${#CACHES[@]}" "$CONTEXTS" "$REPEATS" "${CACHES[@]%%|*}" <<'PY'
import json, statistics, sys
tmp, out, n, contexts, repeats, names = (sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(),
                                         int(sys.argv[5]), sys.argv[6:])
# What a bandwidth-bound step streams: the weights, the payload and the cache's own matrices (gates,
# basis rows). The full cache's bytes over a cache's bound its speed-up.
step = lambda r: r["weight_bytes"] + r["kv_step_read_bytes"]
tok_s = lambda r: r["decode_tokens_per_second"]
median = statistics.median
with open(f"{out}/decode_speed.csv", "w") as f, open(f"{out}/decode_speed_runs.csv", "w") as every:
    f.write("context,cache,threads,decode_tok_s,decode_vs_full,prefill_s,kv_resident_bytes,kept_share,"
            "step_read_bytes,limit_vs_full\n")
    every.write("context,repeat,cache,decode_tok_s,decode_vs_full\n")
    for context in contexts:
        runs = [[json.load(open(f"{tmp}/{context}.{i}.{k}.json")) for k in range(1, repeats + 1)] for i in range(n)]
        full = runs[0]
        for name, rs in zip(names, runs):
            ratios = [tok_s(r) / tok_s(fr) for r, fr in zip(rs, full)]
            for k, (r, ratio) in enumerate(zip(rs, ratios), 1):
                every.write(f"{context},{k},{name},{tok_s(r):.3f},{ratio:.3f}\n")
            r, fr = rs[0], full[0]
            f.write(f"{context},{name},{r['threads']},{median(map(tok_s, rs)):.3f},{median(ratios):.3f},"
                    f"{median(x['prefill_seconds'] for x in rs):.3f},{r['kv_resident_bytes']},"
                    f"{r['kv_payload_bytes'] / fr['kv_payload_bytes']:.4f},{step(r)},{step(fr) / step(r):.3f}\n")
PY
cat "$OUT/decode_speed.csv"

head -c $((OPS_CONTEXT * 6)) "$TMP/all.txt" > "$TMP/ops_prompt.txt"
for i in "${!CACHES[@]}"; do
  args=${CACHES[$i]#*|}
  # shellcheck disable=SC2086
  "$BUILD/bin/kvc-generate" -m "$MODEL" --prompt-file "$TMP/ops_prompt.txt" --prompt-tokens "$OPS_CONTEXT" -n 16 \
    --ignore-eos -q -t 1 $args --count-ops --json-out "$TMP/ops.$i.json"
done
python3 - "$TMP" "$OUT/decode_op_counts.csv" "$MODEL/config.json" "${CACHES[@]%%|*}" <<'PY'
import json, sys
tmp, csv, config, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
layers = json.load(open(config))["num_hidden_layers"]
runs = [json.load(open(f"{tmp}/ops.{i}.json")) for i in range(len(names))]
base = runs[0]["decode_aten_ops_per_step"]
with open(csv, "w") as f:
    f.write("cache,prompt_tokens,aten_ops_per_step,extra_per_layer\n")
    for name, r in zip(names, runs):
        n = r["decode_aten_ops_per_step"]
        f.write(f"{name},{r['prompt_tokens']},{n:.1f},{(n - base) / layers:.1f}\n")
PY
cat "$OUT/decode_op_counts.csv"
