#!/usr/bin/env bash
# Compression while decoding (decoding, cam) beside the presses that evict at every step (h2o, tova,
# streaming_llm, d2o, roco: D2O's long-text comparison), on SmolLM2-135M-Instruct Q4_1 (scripts/model_path.sh smollm2-135m), 2 threads:
#  1. quality: kvc-eval kl over WINDOWS windows of CTX tokens of WikiText-2 test; each window's first quarter
#     is prefilled whole, the rest decoded one token per pass while the method compresses; mean KL and top-1
#     agreement against the uncompressed cache, weights dequantized to float32 (--dtype float32: the KL is the
#     compression's alone, not the 8-bit rounding of the products over blocks) -> OUT/decoding_kl.csv
#  2. speed: kvc-generate, PROMPT tokens of an essay and NEW generated (--ignore-eos); every method's run
#     right after an uncompressed one, REPEATS rounds; medians of tok/s and of the pair ratios, resident KV
#     bytes at the end -> OUT/decoding_speed.csv
# Every method holds about BUDGET entries per KV head: the decoding presses cut to BUDGET every INTERVAL
# passes (fraction=0.5 keeps half of the tokens seen), the bounded ones evict to BUDGET at every pass.
# ONLY="d2o roco" runs those methods alone and keeps the other rows of the CSVs (made with the same settings).
#   recipes/decoding_compression.sh                  # about 50 minutes on an idle 2-core machine
#   PARTS=kl WINDOWS=2 recipes/decoding_compression.sh
#   PARTS=kl ONLY="d2o roco" recipes/decoding_compression.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
OUT="${OUT:-data/results/eviction/decoding}"
CTX="${CTX:-2048}"
WINDOWS="${WINDOWS:-3}"
PROMPT="${PROMPT:-1024}"
NEW="${NEW:-512}"
REPEATS="${REPEATS:-3}"
THREADS="${THREADS:-2}"
BUDGET="${BUDGET:-512}"
INTERVAL="${INTERVAL:-128}"
PARTS="${PARTS:-kl speed}"
ONLY="${ONLY:-}"
MODEL=""
# KVC_SMOKE=1 (the documentation's tests): the repository's model, short windows, two methods, once.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; CTX=128; WINDOWS=1; PROMPT=64; NEW=32; REPEATS=1; BUDGET=32; INTERVAL=8
  OUT=$(mktemp -d)
fi
[ -n "$MODEL" ] || MODEL=$(scripts/model_path.sh smollm2-135m)
# name|--press spec|size flags
METHODS=(
  "decoding_snapkv|decoding:base=snapkv,interval=$INTERVAL,target=$BUDGET|"
  "decoding_knorm|decoding:base=knorm,interval=$INTERVAL,target=$BUDGET|"
  "decoding_keydiff|decoding:base=keydiff,interval=$INTERVAL,target=$BUDGET|"
  "decoding_fraction|decoding:base=snapkv,interval=$INTERVAL,fraction=0.5|"
  "cam_snapkv|cam:base=snapkv,interval=$INTERVAL,target=$BUDGET|"
  "h2o|h2o|--budget $BUDGET"
  "tova|tova|--budget $BUDGET"
  "streaming_llm|streaming_llm|--budget $BUDGET"
  "d2o|d2o|--budget $BUDGET"
  "roco|roco|--budget $BUDGET"
)
[ -z "${KVC_SMOKE:-}" ] || METHODS=("${METHODS[0]}" "${METHODS[4]}")
names=$(printf '%s\n' "${METHODS[@]}" | cut -d'|' -f1)
for only in $ONLY; do
  grep -qxF -- "$only" <<< "$names" || { echo "decoding_compression.sh: ONLY names $only, not a method of this recipe:" $names >&2; exit 2; }
done
# runs NAME: whether this invocation runs method NAME (all, or those ONLY names).
runs() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [[ " $PARTS " == *" kl "* ]]; then
  for m in "${METHODS[@]}"; do
    IFS='|' read -r name spec size <<< "$m"
    runs "$name" || continue
    # shellcheck disable=SC2086  # size holds "--budget N" or nothing
    "$BIN/kvc-eval" kl -m "$MODEL" -f data/text/wikitext2/wiki.test.raw -c "$CTX" --max-windows "$WINDOWS" \
      --context-fraction 0.25 --dtype float32 --press "$spec" $size -t "$THREADS" --json -q > "$TMP/kl.$name.json"
  done
  python3 - "$TMP" "$OUT/decoding_kl.csv" "$CTX" "$WINDOWS" "$MODEL" "${METHODS[@]}" <<'PY'
import json, os, sys
sys.path.insert(0, "recipes/lib")
from result_rows import earlier_rows, kept_row, write_rows
tmp, out, ctx, windows, model, methods = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
# Rows of methods this run left out (ONLY) come from the CSV as it was, if made with the same settings.
earlier = earlier_rows(out)
rows = []
for m in methods:
    name, spec, size = m.split("|")
    spec = (spec + " " + size).strip()
    if not os.path.exists(f"{tmp}/kl.{name}.json"):
        settings = {"spec": spec, "ctx": ctx, "windows": windows, "model": os.path.basename(model)}
        r = kept_row(earlier, name, settings, out, "decoding_compression.sh")
        if r is not None:
            rows.append(r)
        continue
    d = json.load(open(f"{tmp}/kl.{name}.json"))
    rows.append({"method": name, "spec": spec, "kl_mean": f"{d['kl']:.5f}",
                 "top1_agreement": f"{d['top1_agreement']:.4f}", "tokens": d["tokens_scored"], "ctx": ctx,
                 "windows": windows, "model": os.path.basename(model)})
write_rows(out, rows)
PY
  cat "$OUT/decoding_kl.csv"
fi

if [[ " $PARTS " == *" speed "* ]]; then
  gen() {  # gen NAME SPEC [size flags...]: one generation, its stats in TMP/NAME.json
    local name=$1 spec=$2
    shift 2
    "$BIN/kvc-generate" -m "$MODEL" -f data/text/pg_essays/addiction.txt --prompt-tokens "$PROMPT" -n "$NEW" \
      --ignore-eos -t "$THREADS" -q --press "$spec" "$@" --stats-json "$TMP/$name.json" > /dev/null
  }
  for i in $(seq 1 "$REPEATS"); do
    for m in "${METHODS[@]}"; do
      IFS='|' read -r name spec size <<< "$m"
      runs "$name" || continue
      gen "none.$name.$i" none
      # shellcheck disable=SC2086
      gen "$name.$i" "$spec" $size
    done
    echo "round $i of $REPEATS done" >&2
  done
  python3 - "$TMP" "$REPEATS" "$OUT/decoding_speed.csv" "$PROMPT" "$NEW" "$THREADS" "$MODEL" "${METHODS[@]}" <<'PY'
import json, os, statistics, sys
sys.path.insert(0, "recipes/lib")
from result_rows import earlier_rows, kept_row, write_rows
tmp, repeats, out, prompt, new, threads, model = sys.argv[1], int(sys.argv[2]), *sys.argv[3:8]
methods = sys.argv[8:]
load = lambda n: json.load(open(f"{tmp}/{n}.json"))
earlier = earlier_rows(out)
rows = []
for m in methods:
    name, spec, size = m.split("|")
    spec = (spec + " " + size).strip()
    if not os.path.exists(f"{tmp}/{name}.1.json"):  # left out by ONLY: the row as it was, if any
        settings = {"spec": spec, "prompt_tokens": prompt, "new_tokens": new, "threads": threads,
                    "model": os.path.basename(model)}
        r = kept_row(earlier, name, settings, out, "decoding_compression.sh")
        if r is not None:
            rows.append(r)
        continue
    base = [load(f"none.{name}.{i}") for i in range(1, repeats + 1)]
    runs = [load(f"{name}.{i}") for i in range(1, repeats + 1)]
    pairs = [r["decode_tokens_per_second"] / b["decode_tokens_per_second"] for r, b in zip(runs, base)]
    rows.append({"method": name, "spec": spec,
                 "decode_tok_s": f"{statistics.median(r['decode_tokens_per_second'] for r in runs):.1f}",
                 "none_tok_s": f"{statistics.median(b['decode_tokens_per_second'] for b in base):.1f}",
                 "ratio_median": f"{statistics.median(pairs):.3f}", "ratio_min": f"{min(pairs):.3f}",
                 "ratio_max": f"{max(pairs):.3f}", "kv_entries_end": runs[0]["kv_entries"],
                 "none_kv_entries_end": base[0]["kv_entries"],
                 "kv_resident_bytes_end": runs[0]["kv_resident_bytes"],
                 "none_kv_resident_bytes_end": base[0]["kv_resident_bytes"],
                 "prompt_tokens": prompt, "new_tokens": new, "repeats": repeats, "threads": threads,
                 "model": os.path.basename(model)})
write_rows(out, rows)
PY
  cat "$OUT/decoding_speed.csv"
fi
