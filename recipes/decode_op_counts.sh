#!/usr/bin/env bash
# The framework overhead of a decode step: ATen operator calls per step (kvc-generate --count-ops) on
# the 134M benchmark model of recipes/eviction_decode_speedup.sh, uncompressed and with each press that
# evicts or compresses at RATIO. Each call costs dispatch and allocation time that the weights'
# bandwidth bound does not count; unlike a time, the count is the same on an idle or a busy machine.
# Writes OUT/decode_op_counts.csv and prints it as a Markdown table; OUT/decode_op_counts_by_name.csv holds
# each method's calls per step by ATen operator, and the table after it the uncompressed step's largest.
# Usage: BUILD=build recipes/decode_op_counts.sh [OUT_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=${1:-$ROOT/data/results/eviction}
CONTEXT=${CONTEXT:-512}
NEW=${NEW:-65}
RATIO=${RATIO:-0.9}
MODEL=${MODEL:-/tmp/kvc-llama-125m-16k}
source "$ROOT/recipes/lib/bench_tokenizer.sh"
. "$ROOT/recipes/lib/committed_settings.sh"  # dynamickv and kvcompose* run the settings of the committed results
PRESSES=${PRESSES:-"none streaming_llm snapkv kvcompose h2o tova d2o"}
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then CONTEXT=128; NEW=5; PRESSES="none h2o"; MODEL=${MODEL_SMOKE:-/tmp/kvc-smoke-llama}; OUT=$(mktemp -d); fi

if [ ! -f "$MODEL/config.json" ]; then
  "$BUILD/bin/kvc-make-checkpoint" --preset llama-125m --context 16384 "${VOCAB[@]}" --tokenizer "$TOKENIZER" -o "$MODEL"
fi
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat "$ROOT"/data/text/pg_essays/*.txt > "$TMP/all.txt"
head -c $((CONTEXT * 6)) "$TMP/all.txt" > "$TMP/prompt.txt"
for press in $PRESSES; do
  ratio=$RATIO; [ "$press" = none ] && ratio=0
  "$BUILD/bin/kvc-generate" -m "$MODEL" --prompt-file "$TMP/prompt.txt" --prompt-tokens "$CONTEXT" -n "$NEW" \
    --ignore-eos -q -t 1 --press "$(press_spec "$press")" --ratio "$ratio" --count-ops --json-out "$TMP/$press.json"
done
python3 - "$TMP" "$OUT/decode_op_counts.csv" "$RATIO" $PRESSES <<'PY'
import json, sys
tmp, csv, ratio, presses = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
runs = {p: json.load(open(f"{tmp}/{p}.json")) for p in presses}
layers = json.load(open(runs["none"]["model"] + "/config.json"))["num_hidden_layers"]
base = runs["none"]["decode_aten_ops_per_step"]
lines = ["press,ratio,prompt_tokens,generated_tokens,aten_ops_per_step,extra_per_step,extra_per_layer"]
print(f"| method | ATen calls per decode step | added per step | added per layer |\n|---|---|---|---|")
for p, r in runs.items():
    ops = r["decode_aten_ops_per_step"]
    lines.append(f"{p},{0 if p == 'none' else ratio},{r['prompt_tokens']},{r['generated_tokens']},{ops:.1f},"
                 f"{ops - base:.1f},{(ops - base) / layers:.1f}")
    print(f"| {'uncompressed' if p == 'none' else p} | {ops:.0f} | {ops - base:.0f} | {(ops - base) / layers:.1f} |")
open(csv, "w").write("\n".join(lines) + "\n")
names = sorted({n for r in runs.values() for n in r["decode_aten_ops_per_step_by_name"]},
               key=lambda n: -runs["none"]["decode_aten_ops_per_step_by_name"].get(n, 0))
lines = ["operator," + ",".join(presses)]
for n in names:
    lines.append(n + "," + ",".join(f"{runs[p]['decode_aten_ops_per_step_by_name'].get(n, 0):.1f}" for p in presses))
open(csv.replace(".csv", "_by_name.csv"), "w").write("\n".join(lines) + "\n")
print(f"\n| operator (uncompressed step) | calls per step | per layer |\n|---|---|---|")
for n in names[:10]:
    calls = runs["none"]["decode_aten_ops_per_step_by_name"].get(n, 0)
    print(f"| {n} | {calls:.0f} | {calls / layers:.1f} |")
PY
