#!/usr/bin/env bash
# Eviction presses on Gemma 3 270M (the GGUF scripts/setup.sh installs): needle accuracy at 4K tokens
# (secret template, depths 0/0.5/1, 2 samples each, the question seen by the compression), at ratios
# 0.5 and 0.9. Presses act on the 3 global layers; the 15 sliding-window layers keep their window.
# Writes data/results/gemma3/eviction_needle.{md,json}.
#   recipes/gemma3_eviction_needle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. recipes/lib/committed_settings.sh  # dynamickv and kvcompose* run the settings of the committed results
BIN=build/bin
GGUF=$(scripts/model_path.sh gemma3-270m)
LENGTH=4096
SAMPLES=2
METHODS=(snapkv pyramidkv dynamickv kvcompose streaming_llm tova)
RATIOS=(0.5 0.9)
OUT=data/results/gemma3
# KVC_SMOKE=1 (the README test suite): one method, one short cell, into a scratch folder.
if [ -n "${KVC_SMOKE:-}" ]; then LENGTH=256; SAMPLES=1; METHODS=(snapkv); RATIOS=(0.5); OUT=$(mktemp -d); fi
mkdir -p "$OUT"
rows="$OUT/eviction_needle.jsonl"
: > "$rows"
for method in "${METHODS[@]}"; do
  for ratio in "${RATIOS[@]}"; do
    "$BIN/kvc-eval" needle -m "$GGUF" --dtype float32 --haystack data/text/pg_essays --lengths $LENGTH --depths 0,0.5,1 \
      --samples $SAMPLES --seed 0 --press "$(press_spec "$method")" --ratio "$ratio" --json \
      | python3 -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({'method': sys.argv[1], 'ratio': float(sys.argv[2]), 'accuracy': d['accuracy'], 'samples': sum(len(c['samples']) for c in d['cells']), 'compression_ratio': sum(s['compression_ratio'] for c in d['cells'] for s in c['samples']) / sum(len(c['samples']) for c in d['cells'])}))" "$method" "$ratio" \
      >> "$rows"
  done
done
python3 - "$rows" "$OUT" "$LENGTH" <<'PY'
import json, pathlib, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out, length = pathlib.Path(sys.argv[2]), sys.argv[3]
ratios = sorted({r["ratio"] for r in rows})
lines = ["| method | " + " | ".join(f"accuracy @{r}" for r in ratios) + " |", "|---|" + "---|" * len(ratios)]
for m in dict.fromkeys(r["method"] for r in rows):
    cells = {r["ratio"]: r for r in rows if r["method"] == m}
    lines.append(f"| {m} | " + " | ".join(f"{cells[r]['accuracy']:.2f}" for r in ratios) + " |")
(out / "eviction_needle.md").write_text("\n".join(lines) + "\n")
(out / "eviction_needle.json").write_text(json.dumps({"length": int(length), "rows": rows}, indent=1) + "\n")
print("\n".join(lines))
PY
rm -f "$rows"
