#!/usr/bin/env bash
# RULER's 13 tasks on SmolLM2-135M-Instruct (the GGUF scripts/setup.sh installs), uncompressed, through its
# chat template (kvc-eval tasks --chat), at 4K tokens (RULER's lengths count the generated tokens). qa_1 and
# qa_2 need RULER's SQuAD and HotpotQA files (QA_DIR); without them they are skipped. Writes
# data/results/smollm2/chat_ruler_4k/tasks.{json,csv,md}.
#   recipes/smollm2_chat_ruler.sh                                   # 10 samples per task
#   KVC_SAMPLES=25 QA_DIR=~/ruler-qa recipes/smollm2_chat_ruler.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVC_BIN:-build/bin}
GGUF=$(scripts/model_path.sh smollm2-135m)
SAMPLES=${KVC_SAMPLES:-10}
LENGTHS=4096
OUT=data/results/smollm2/chat_ruler_4k
EXTRA=()
if [ -n "${QA_DIR:-}" ]; then EXTRA=(--qa-dir "$QA_DIR"); fi
# KVC_SMOKE=1 (the README test suite): one short sample per task, 8 tokens per answer, into a scratch folder.
if [ -n "${KVC_SMOKE:-}" ]; then SAMPLES=1; LENGTHS=512; OUT=$(mktemp -d)/ruler; EXTRA+=(--max-new-tokens 8); fi
rm -rf "${OUT:?}"
"$BIN/kvc-eval" tasks -m "$GGUF" --chat --tasks ruler --lengths "$LENGTHS" --samples "$SAMPLES" --seed 0 \
  ${EXTRA[@]+"${EXTRA[@]}"} --out-dir "$OUT"
cat "$OUT/tasks.md"
