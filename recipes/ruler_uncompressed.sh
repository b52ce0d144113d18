#!/usr/bin/env bash
# RULER's tasks on the uncompressed models, so that readers know which cells carry signal before
# compressing: Gemma 3 270M (the GGUF scripts/setup.sh installs) at 4K tokens (GEMMA_LENGTHS=4096,8192
# adds 8K), kvc-micro-lm and kvc-tiny-lm (when scripts/model_path.sh finds it) at their context of 1,024,
# stories260K at its 512 (RULER's lengths count the generated tokens). qa_1/qa_2 need RULER's SQuAD and
# HotpotQA files (QA_DIR); without them they are skipped. Writes data/results/ruler/<model>/tasks.{json,csv,md}.
#   recipes/ruler_uncompressed.sh                                      # 10 samples per task and length
#   KVC_SAMPLES=25 QA_DIR=~/ruler-qa recipes/ruler_uncompressed.sh     # squad.json, hotpotqa.json there
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
SAMPLES=${KVC_SAMPLES:-10}
GEMMA_LENGTHS=${GEMMA_LENGTHS:-4096}
NEEDLE_LENGTHS=1024
STORIES_LENGTHS=512
OUT=data/results/ruler
EXTRA=()
if [ -n "${QA_DIR:-}" ]; then EXTRA=(--qa-dir "$QA_DIR"); fi
# KVC_SMOKE=1 (the README test suite): one short sample per task, 8 tokens per answer (decoding RULER's
# 128-token answers through Gemma's 262K-entry vocabulary is most of a run), into a scratch folder.
if [ -n "${KVC_SMOKE:-}" ]; then SAMPLES=1; GEMMA_LENGTHS=512; OUT=$(mktemp -d); EXTRA+=(--max-new-tokens 8); fi
GGUF=$(scripts/model_path.sh gemma3-270m)
run() {  # run NAME MODEL LENGTHS [TASKS]
  rm -rf "${OUT:?}/$1"
  "$BIN/kvc-eval" tasks -m "$2" $(case "$2" in *.gguf) echo --dtype float32;; esac) --tasks "${4:-ruler}" --lengths "$3" --samples "$SAMPLES" --seed 0 ${EXTRA[@]+"${EXTRA[@]}"} \
    --out-dir "$OUT/$1"
  cat "$OUT/$1/tasks.md"
}
run gemma3-270m "$GGUF" "$GEMMA_LENGTHS"
run kvc-micro-lm data/models/kvc-micro-lm "$NEEDLE_LENGTHS"
if [ -z "${KVC_SMOKE:-}" ] && TINY=$(scripts/model_path.sh kvc-tiny-lm 2>/dev/null); then run kvc-tiny-lm "$TINY" "$NEEDLE_LENGTHS"; fi
# stories260K's 512-token vocabulary spells words in many tokens: niah_multiquery, vt and cwe need more
# than its 512-token context even with the fewest haystack lines, words or chain links RULER allows.
run stories260K data/models/stories260K "$STORIES_LENGTHS" \
  niah_single_1,niah_single_2,niah_single_3,niah_multikey_1,niah_multikey_2,niah_multikey_3,niah_multivalue,fwe
