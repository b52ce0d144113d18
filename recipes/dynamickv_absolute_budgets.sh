#!/usr/bin/env bash
# DynamicKV at absolute cache budgets, as its paper reports them (entries kept per KV head and layer on
# average), against SnapKV, PyramidKV and StreamingLLM at the same budgets, on SmolLM2-135M-Instruct Q4_1
# (scripts/model_path.sh smollm2-135m; 30 layers, every layer compressed): the needle (secret template) in
# 2,048-token chat prompts, SAMPLES needles at each of 5 depths per cell, question-aware, each press at its
# defaults (DynamicKV's from its official code). Writes OUT/absolute_budgets.csv.
#   recipes/dynamickv_absolute_budgets.sh            # about 10 minutes here
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
OUT="${OUT:-data/results/eviction/needle}"
SAMPLES="${SAMPLES:-2}"
LENGTH=2048
BUDGETS="128 512"
PRESSES="dynamickv snapkv pyramidkv streaming_llm"
chat=(--chat)
MODEL=""
# KVC_SMOKE=1 (the documentation's tests): the repository's model, short prompts, one needle per cell.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; LENGTH=256; SAMPLES=1; BUDGETS=32; PRESSES="dynamickv snapkv"; chat=()
  OUT=$(mktemp -d)
fi
[ -n "$MODEL" ] || MODEL=$(scripts/model_path.sh smollm2-135m)
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
needle() {  # needle NAME [compression flags...]
  local name=$1
  shift
  "$BIN/kvc-eval" needle -m "$MODEL" "${chat[@]}" --haystack data/text/pg_essays --lengths "$LENGTH" \
    --depths 0,0.25,0.5,0.75,1 --samples "$SAMPLES" -t 2 --json -q "$@" > "$TMP/$name.json"
}
needle none
for budget in $BUDGETS; do
  for press in $PRESSES; do needle "$press.$budget" --press "$press" --budget "$budget"; done
done
python3 - "$TMP" "$OUT/absolute_budgets.csv" "$LENGTH" "$BUDGETS" $PRESSES <<'PY'
import csv, json, math, os, sys
tmp, out, length, budgets, presses = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5:]
rows = []
def row(name, press, budget):
    d = json.load(open(f"{tmp}/{name}.json"))
    n, acc = d["samples"], d["accuracy"]  # needles in all (depths × per depth)
    rows.append({"press": press, "budget": budget, "accuracy": f"{acc:.3f}",
                 "standard_error": f"{math.sqrt(acc * (1 - acc) / n):.3f}", "needles": n, "prompt_tokens": length})
row("none", "none", "")
for b in budgets:
    for p in presses:
        row(f"{p}.{b}", p, b)
with open(out + ".part", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
os.replace(out + ".part", out)
PY
cat "$OUT/absolute_budgets.csv"
