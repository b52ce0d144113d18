#!/bin/sh
# The uncompressed needle grid of kvc-tiny-lm committed under data/results/needle-uncompressed/.
# Usage: recipes/needle_uncompressed.sh [BUILD_DIR] [OUT_DIR]   (run from the repository root;
# kvc-tiny-lm is read from ../shared: scripts/model_path.sh)
# KVC_SMOKE=1 (the README test suite): one cell on the repository's kvc-micro-lm, into a scratch folder.
set -eu
BUILD=${1:-build}
OUT=${2:-data/results/needle-uncompressed}
if [ -n "${KVC_SMOKE:-}" ]; then
  "$BUILD/bin/kvc-eval" needle -m data/models/kvc-micro-lm --haystack data/text/pg_essays \
    --lengths 256 --depths 0.5 --samples 1 --seed 0 --out "$(mktemp -d)"
  exit 0
fi
"$BUILD/bin/kvc-eval" needle -m "$(scripts/model_path.sh kvc-tiny-lm)" --haystack data/text/pg_essays \
  --lengths 256,512,768,1000 --depths 0,0.25,0.5,0.75,1 --samples 4 --seed 0 --out "$OUT"
