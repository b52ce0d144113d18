#!/usr/bin/env bash
# What the leaderboard's retrieval rows cost on Gemma 3 270M: one 4,096-token prompt of essay text,
# 24 greedy tokens, with the dense cache, the retrieval specs of recipes/leaderboard_gemma3.sh and the
# first of them with next-layer prefetch.
# Each run prints its speed, the RAM the cache holds and, for retrieval, the bytes read from storage
# and the store's size. Writes OUT/retrieval_cost.txt (the last lines of each run).
#   recipes/retrieval_cost_gemma3.sh
#   THREADS=2 recipes/retrieval_cost_gemma3.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
MODEL=$(scripts/model_path.sh gemma3-270m)
PROMPT_TOKENS=4096
NEW_TOKENS=24
THREADS="${THREADS:-1}"
SPECS="adaptive:budget=1024 adaptive:budget=1024,prefetch=1 static:budget=1024 adaptive:budget=256"
OUT="${OUT:-data/results/leaderboard/gemma3}"
# KVC_SMOKE=1 (the README test suite): the repository's needle model, a short prompt.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; PROMPT_TOKENS=400; NEW_TOKENS=8; SPECS="adaptive:budget=64"; OUT=$(mktemp -d)
fi
mkdir -p "$OUT"
prompt=$(mktemp)
trap 'rm -f "$prompt"' EXIT
cat data/text/pg_essays/*.txt > "$prompt"
report="$OUT/retrieval_cost.txt"
: > "$report"
for spec in none $SPECS; do
  flags=()
  [ "$spec" = none ] || flags=(--retrieval "$spec")
  echo "== $spec" | tee -a "$report"
  "$BIN/kvc-generate" -m "$MODEL" -f "$prompt" --prompt-tokens "$PROMPT_TOKENS" -n "$NEW_TOKENS" --ignore-eos \
    -t "$THREADS" -q "${flags[@]}" 2>&1 | grep '^kvc-generate:' | tee -a "$report"
done
