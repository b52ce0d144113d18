#!/usr/bin/env bash
# The leaderboard on Gemma 3 270M (the GGUF scripts/setup.sh installs): every registered press at
# compression ratios 0.25/0.5/0.75/0.9, plus the uncompressed cache, on tasks where the uncompressed
# model has signal, at 4K tokens, question-aware. One prefill per sample serves all 49 cells
# (kvc-eval sweep --prefill shared). Presses act on the model's 3 global layers; its 15 sliding-window
# layers keep their 512-entry window, so the cache's measured compression is below the nominal ratio.
# Each task is a resumable sweep of its own: interrupt at will, re-run to continue.
# Writes data/results/leaderboard/gemma3/<task>/results.{jsonl,md,csv} and leaderboard.md (mean score
# ± standard error over the samples, and the measured compression of the cache).
#   recipes/leaderboard_gemma3.sh                      # needle, niah_single_2, niah_multikey_1
#   TASKS="needle" SAMPLES=10 recipes/leaderboard_gemma3.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
MODEL=$(scripts/model_path.sh gemma3-270m)
LENGTH=4096
SAMPLES="${SAMPLES:-50}"
TASKS="${TASKS:-needle niah_single_2 niah_multikey_1}"
RATIOS=0.25,0.5,0.75,0.9
THREADS="${THREADS:-2}"
OUT="${OUT:-data/results/leaderboard/gemma3}"
# KVC_SMOKE=1 (the README test suite): the repository's needle model, short prompts, two samples.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; LENGTH=512; SAMPLES=2; TASKS="needle niah_single_2"; OUT=$(mktemp -d)
fi
mkdir -p "$OUT"
for task in $TASKS; do
  if [ "$task" = needle ]; then
    # 50 needles per cell: SAMPLES/5 at each of five depths.
    per_depth=$(( (SAMPLES + 4) / 5 ))
    args=(--tasks needle --haystack data/text/pg_essays --needle-lengths "$LENGTH" --needle-depths 0,0.25,0.5,0.75,1
          --samples "$per_depth")
  else
    # RULER's answers are one 7-digit number after the answer prefix: 24 new tokens hold it.
    args=(--tasks "$task" --task-lengths "$LENGTH" --samples "$SAMPLES" --ruler-new-tokens 24)
  fi
  "$BIN/kvc-eval" sweep -m "$MODEL" --methods all --ratios "$RATIOS" "${args[@]}" --seed 0 -t "$THREADS" \
    --out-dir "$OUT/$task" --json > "$OUT/$task.summary.json"
done
python3 scripts/leaderboard_table.py "$OUT" $TASKS | tee "$OUT/leaderboard.md"
