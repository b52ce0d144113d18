#!/usr/bin/env bash
# KVCompose's own evaluation (arXiv:2509.05165, Tables 2 and 3) on SmolLM2-135M-Instruct Q4_1
# (scripts/model_path.sh smollm2-135m; Llama architecture, 30 layers, 3 KV heads, every layer compressed):
# RULER at 4,096 tokens through the model's chat template, the paper's compression ratios
# 0.1/0.25/0.4/0.5/0.6/0.7/0.8/0.9 and the uncompressed cache, KVCompose at its defaults (the paper's
# task-agnostic scoring, task=repeat, kernel=1) against the paper's structured baselines: TOVA, SnapKV,
# PyramidKV, StreamingLLM, Expected Attention and DuoAttention (heads scored on the fly; at each ratio as many
# streaming heads as remove that share of the cache, where kvpress' evaluation streams the ratio's share of
# the heads and so removes less). The tools compute the paper's summaries: the
# area under each task's score–ratio curve, their mean over the tasks, and the ratio achievable at a
# tolerance of 10% and 20% (kvc-eval sweep's "Across the compression range" table in OUT/results.md).
# TASKS are RULER's tasks on which the uncompressed model scores above zero
# (data/results/smollm2/chat_ruler_4k: niah_single_3, niah_multikey_3 and vt score 0, cwe 0.04; qa_1 and
# qa_2 need RULER's SQuAD and HotpotQA files); answers are cut at 48 tokens (RULER's niah answers are at
# most four 7-digit numbers; decoding stops at the end of the assistant's turn).
# QUERY=aware (default agnostic, the paper's headline setting) feeds the question before compression.
# One sweep, resumable: interrupt at will and re-run (in another clone too, after `save_progress OUT` from
# recipes/lib/committed_results.sh has kept the finished samples). Writes OUT/results.{jsonl.gz,md,csv}.
#   recipes/kvcompose_ruler.sh                   # 5 samples per task and cell, question-agnostic
#   QUERY=aware SAMPLES=10 recipes/kvcompose_ruler.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
SAMPLES="${SAMPLES:-5}"
THREADS="${THREADS:-2}"
QUERY="${QUERY:-agnostic}"
OUT="${OUT:-data/results/kvcompose_ruler/smollm2-$QUERY}"
TASKS="${TASKS:-niah_single_1,niah_single_2,niah_multikey_1,niah_multikey_2,niah_multivalue,niah_multiquery,fwe}"
RATIOS=0.1,0.25,0.4,0.5,0.6,0.7,0.8,0.9
METHODS=none,kvcompose,tova,snapkv,pyramidkv,streaming_llm,expected_attention,duo_attention
LENGTH=4096
MODEL=""
chat=(--chat)
# KVC_SMOKE=1 (the documentation's tests): the repository's model, short prompts, one sample, two tasks.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; LENGTH=512; SAMPLES=1; TASKS=niah_single_1,fwe; RATIOS=0.5,0.9
  METHODS=none,kvcompose,snapkv; OUT=$(mktemp -d); chat=()
fi
[ -n "$MODEL" ] || MODEL=$(scripts/model_path.sh smollm2-135m)
source recipes/lib/committed_results.sh
mkdir -p "$OUT"
unpack_results "$OUT"
# Each invocation appends its summary (cells run and reused, prefill and decode seconds) to OUT/runs.jsonl.
"$BIN/kvc-eval" sweep -m "$MODEL" ${chat[@]+"${chat[@]}"} --methods "$METHODS" --ratios "$RATIOS" --tasks "$TASKS" \
  --task-lengths "$LENGTH" --samples "$SAMPLES" --ruler-new-tokens 48 --query "$QUERY" --seed 0 -t "$THREADS" \
  --out-dir "$OUT" --json >> "$OUT/runs.jsonl"
sed -n '/^### Across the compression range/,$p' "$OUT/results.md"
pack_results "$OUT"
