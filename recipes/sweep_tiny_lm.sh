#!/bin/sh
# Every registered method × the default ratios on kvc-tiny-lm: KL on held-out text, the needle at 512
# and 1000 tokens, and single-needle RULER. Resumable: re-run after Ctrl-C to finish.
# Usage: recipes/sweep_tiny_lm.sh [BUILD_DIR] [OUT_DIR] [QUERY_MODE]   (run from the repository root;
# kvc-tiny-lm is read from ../shared: scripts/model_path.sh)
set -eu
BUILD=${1:-build}
OUT=${2:-results/sweep-tiny-lm}
QUERY=${3:-agnostic}
"$BUILD/bin/kvc-eval" sweep -m "$(scripts/model_path.sh kvc-tiny-lm)" --methods all --ratios 0.25,0.5,0.75,0.9 \
  --tasks kl,needle,niah_single --file data/text/wikitext2/wiki.test.raw --window 1024 --max-windows 4 \
  --haystack data/text/pg_essays --needle-lengths 512,1000 --needle-depths 0,0.25,0.5,0.75,1 --samples 2 \
  --task-lengths 512 --query "$QUERY" --out "$OUT"
