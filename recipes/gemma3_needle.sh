#!/usr/bin/env bash
# Needle in a haystack on Gemma 3 270M (the GGUF scripts/setup.sh installs), uncompressed, at 1K to 16K
# tokens, with kvc-eval's two templates (secret, passkey) and a plain-language question of the kind an
# instruction-tuned model would be asked. The model is a base model: what it retrieves is what it is.
# Writes data/results/gemma3/needle_{secret,passkey,plain}/ (needle_grid.md, cells.jsonl, ...).
#   recipes/gemma3_needle.sh                         # 5 lengths x 3 depths x 2 samples per template
#   KVC_SAMPLES=4 recipes/gemma3_needle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
GGUF=$(scripts/model_path.sh gemma3-270m)
LENGTHS=1024,2048,4096,8192,16384
DEPTHS=0,0.5,1
SAMPLES=${KVC_SAMPLES:-2}
OUT=data/results/gemma3
# KVC_SMOKE=1 (the README test suite): one short cell per template, into a scratch folder.
if [ -n "${KVC_SMOKE:-}" ]; then LENGTHS=256; DEPTHS=0.5; SAMPLES=1; OUT=$(mktemp -d); fi
common=(-m "$GGUF" --dtype float32 --haystack data/text/pg_essays --lengths "$LENGTHS" --depths "$DEPTHS" --samples "$SAMPLES"
        --seed 0 --max-new-tokens 12)
for template in secret passkey; do
  rm -rf "$OUT/needle_$template"
  "$BIN/kvc-eval" needle "${common[@]}" --templates "$template" --out-dir "$OUT/needle_$template"
done
rm -rf "$OUT/needle_plain"
"$BIN/kvc-eval" needle "${common[@]}" \
  --needle-template "The special magic number mentioned in this document is {number}." \
  --question-template "What is the special magic number mentioned in the document above? The special magic number is" \
  --out-dir "$OUT/needle_plain"
for template in secret passkey plain; do
  echo "== $template"
  cat "$OUT/needle_$template/needle_grid.md"
done
