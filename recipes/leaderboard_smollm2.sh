#!/usr/bin/env bash
# The press leaderboard on SmolLM2-135M-Instruct Q4_1 (scripts/model_path.sh smollm2-135m; Llama
# architecture, 30 layers, 3 KV heads, every layer compressed): every registered press at compression
# ratios 0.25/0.5/0.75/0.9 and the uncompressed cache, through the model's chat template (--chat), on the
# tasks where the uncompressed model has signal: the needle (secret template) at 2,048 tokens and RULER's
# niah_single_2 at 4,096 (data/results/smollm2/: 1.0 uncompressed on both), and niah_multikey_1 at 4,096
# (the uncompressed model answers 2 of the leaderboard's 5 samples), and KL / perplexity against the
# uncompressed model on the longest essay (kl: each 2,048-token window's first half compressed, its second
# half fed 64 tokens at a time and scored; 4 windows, raw text). One prefill per sample serves
# every press cell (kvc-eval sweep --prefill shared). The presses that size themselves join as the sweep's
# --methods all leaves them out, at the settings of SIZED below (but decoding and cam, which compress while
# decoding and have nothing to cut in a few answer tokens: recipes/decoding_compression.sh measures them).
# LU-KV (LUKV, the press its curve ranks by; empty: none) joins with a budget curve made once for this model by
# kvc-profile --lukv-press on WikiText-2 (another domain than the tasks' essays; 8 windows of 1,024 tokens and
# a horizon of 128), kept in data/results/leaderboard/smollm2/lukv.safetensors with its lukv.csv (both
# QUERY settings read it).
# ABLATIONS (empty: none) adds KVCompose's ablations at the paper's settings: every layer the same budget
# (budgets=uniform), every head of a layer the same positions (tokens=aligned), and both.
# QUERY=agnostic compresses the context before the question (into OUT=...-agnostic). Each task is a
# resumable sweep: interrupt at will, re-run to continue (in another clone too, after
# `save_progress OUT/<task>` from recipes/lib/committed_results.sh has kept the finished samples).
# Writes OUT/<task>/results.{jsonl.gz,md,csv} and OUT/leaderboard.md (mean ± standard error per cell and
# the measured share of the cache kept).
#   recipes/leaderboard_smollm2.sh                         # 10 samples per task
#   SAMPLES=20 TASKS=needle recipes/leaderboard_smollm2.sh
#   QUERY=agnostic recipes/leaderboard_smollm2.sh
#   TASKS=kl recipes/leaderboard_smollm2.sh               # KL / perplexity with the first half compressed
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
MODEL=""
SAMPLES="${SAMPLES:-10}"
TASKS_ASKED="${TASKS:-}"
TASKS="${TASKS:-needle niah_single_2 niah_multikey_1 kl}"
RATIOS=0.25,0.5,0.75,0.9
THREADS="${THREADS:-2}"
QUERY="${QUERY:-aware}"
OUT="${OUT:-data/results/leaderboard/smollm2$([ "$QUERY" = aware ] || echo "-$QUERY")}"
NEEDLE_LENGTH=2048
RULER_LENGTH=4096
KL_TEXT=data/text/pg_essays/worked.txt
KL_WINDOW=2048
LUKV="${LUKV-expected_attention}"
LUKV_TEXT=data/text/wikitext2/wiki.test.raw
LUKV_CONTEXT=1024
LUKV_WINDOWS=8
CURVE_DIR=data/results/leaderboard/smollm2
SIZED="think:channels=0.5,simlayerkv:threshold=0.9,duo_attention:streaming=0.5,dms:base=keydiff,threshold=-0.5"
ABLATIONS="${ABLATIONS-kvcompose:budgets=uniform,kvcompose:tokens=aligned,kvcompose:budgets=uniform,tokens=aligned}"
# KVC_SMOKE=1 (the documentation's tests): the repository's model, short prompts, one sample, two presses.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; NEEDLE_LENGTH=256; RULER_LENGTH=320; KL_WINDOW=256; LUKV_CONTEXT=128; LUKV_WINDOWS=1; SAMPLES=1; TASKS="${TASKS_ASKED:-needle}"
  OUT=$(mktemp -d); CURVE_DIR=$OUT
fi
[ -n "$MODEL" ] || MODEL=$(scripts/model_path.sh smollm2-135m)
methods=(--methods all)
[ -z "${KVC_SMOKE:-}" ] || methods=(--methods none,snapkv,chunkkv)
mkdir -p "$OUT"
source recipes/lib/lukv_curve.sh
lukv=()
[ -z "$LUKV" ] || lukv_curve "$CURVE_DIR" -m "$MODEL" -f "$LUKV_TEXT" -c "$LUKV_CONTEXT" --windows "$LUKV_WINDOWS" --lukv-press "$LUKV" -t "$THREADS"
source recipes/lib/committed_results.sh
for task in $TASKS; do
  unpack_results "$OUT/$task"
  chat=(--chat)
  if [ "$task" = kl ]; then
    args=(--tasks kl -f "$KL_TEXT" -c "$KL_WINDOW" --max-windows 4 --chunk 64)
    chat=()
  elif [ "$task" = needle ]; then
    # SAMPLES needles per cell, spread over five depths.
    per_depth=$(( (SAMPLES + 4) / 5 ))
    args=(--tasks needle --templates secret --haystack data/text/pg_essays --needle-lengths "$NEEDLE_LENGTH"
          --needle-depths 0,0.25,0.5,0.75,1 --samples "$per_depth")
  else
    args=(--tasks "$task" --task-lengths "$RULER_LENGTH" --samples "$SAMPLES" --ruler-new-tokens 24)
  fi
  [ -z "${KVC_SMOKE:-}" ] || chat=()
  common=(-m "$MODEL" "${chat[@]}" --ratios "$RATIOS" "${args[@]}" --query "$QUERY" --seed 0 -t "$THREADS"
          --out-dir "$OUT/$task")
  # Each invocation appends its summary (cells run and reused, prefill and decode seconds) to OUT/<task>.runs.jsonl.
  "$BIN/kvc-eval" sweep "${common[@]}" "${methods[@]}" --json >> "$OUT/$task.runs.jsonl"
  if [ -z "${KVC_SMOKE:-}" ]; then
    # The same folder: the cells above are reused, the presses that size themselves are added (no ratio).
    "$BIN/kvc-eval" sweep "${common[@]}" --methods "none,$SIZED" --json >> "$OUT/$task.runs.jsonl"
  fi
  if [ -n "$ABLATIONS" ] && [ -z "${KVC_SMOKE:-}" ]; then
    "$BIN/kvc-eval" sweep "${common[@]}" --methods "none,$ABLATIONS" --json >> "$OUT/$task.runs.jsonl"
  fi
  if [ ${#lukv[@]} -gt 0 ]; then
    "$BIN/kvc-eval" sweep "${common[@]}" --methods none,lukv "${lukv[@]}" --json >> "$OUT/$task.runs.jsonl"
  fi
done
python3 scripts/leaderboard_table.py "$OUT" needle niah_single_2 niah_multikey_1 kl | tee "$OUT/leaderboard.md"
for task in $TASKS; do pack_results "$OUT/$task"; done
