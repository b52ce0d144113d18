#!/bin/sh
# The uncompressed needle grid of kvc-tiny-lm committed under data/results/needle-uncompressed/.
# Usage: recipes/needle_uncompressed.sh [BUILD_DIR] [OUT_DIR]   (run from the repository root)
set -eu
BUILD=${1:-build}
OUT=${2:-data/results/needle-uncompressed}
"$BUILD/bin/kvc-eval" needle -m data/models/kvc-tiny-lm --haystack data/text/pg_essays \
  --lengths 256,512,768,1000 --depths 0,0.25,0.5,0.75,1 --samples 4 --seed 0 --out "$OUT"
