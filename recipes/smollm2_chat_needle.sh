#!/usr/bin/env bash
# Needle in a haystack on SmolLM2-135M-Instruct (the GGUF scripts/setup.sh installs), uncompressed, through
# its chat template (kvc-eval needle --chat: the haystack and the question as one user turn, the model
# answering as the assistant), at 1K to 8K tokens with the secret, passkey and plain templates. Writes
# data/results/smollm2/chat_needle_{secret,passkey,plain}/ (needle_grid.md, cells.jsonl, ...).
#   recipes/smollm2_chat_needle.sh                   # 4 lengths x 5 depths x 2 samples per template
#   KVC_SAMPLES=4 recipes/smollm2_chat_needle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVC_BIN:-build/bin}
GGUF=$(scripts/model_path.sh smollm2-135m)
LENGTHS=1024,2048,4096,8160  # 8160 + 32 answer tokens: the 8,192 of the context
DEPTHS=0,0.25,0.5,0.75,1
SAMPLES=${KVC_SAMPLES:-2}
OUT=data/results/smollm2
# KVC_SMOKE=1 (the README test suite): one short cell per template, into a scratch folder.
if [ -n "${KVC_SMOKE:-}" ]; then LENGTHS=256; DEPTHS=0.5; SAMPLES=1; OUT=$(mktemp -d); fi
for template in secret passkey plain; do
  # A re-run resumes from cells.jsonl (cells made with other settings are refused).
  "$BIN/kvc-eval" needle -m "$GGUF" --chat --templates "$template" --haystack data/text/pg_essays \
    --lengths "$LENGTHS" --depths "$DEPTHS" --samples "$SAMPLES" --seed 0 --out-dir "$OUT/chat_needle_$template"
done
for template in secret passkey plain; do
  echo "== $template"
  cat "$OUT/chat_needle_$template/needle_grid.md"
done
