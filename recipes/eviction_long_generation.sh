#!/usr/bin/env bash
# A 10,000-token generation with a bounded cache (H2O, TOVA, StreamingLLM, D2O): the cache holds
# --budget entries per KV head, evicting on every step once full, so resident KV bytes stay flat and
# decoding runs past the model's 512-token context. Writes data/results/eviction/long_generation.csv.
# Usage: recipes/eviction_long_generation.sh [BUILD_DIR] [OUT_DIR] [TOKENS]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build}/bin
OUT=${2:-$ROOT/data/results/eviction}
TOKENS=${3:-10000}
MODEL=${MODEL:-$ROOT/data/models/stories260K}
BUDGET=${BUDGET:-64}
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then TOKENS=600; fi

mkdir -p "$OUT"
echo "press,budget,generated_tokens,stop_reason,kv_entries,kv_final_resident_bytes,kv_peak_resident_bytes,decode_tokens_per_second,peak_rss_bytes" \
  > "$OUT/long_generation.csv"
for press in h2o tova streaming_llm d2o; do
  "$BIN/kvc-generate" -m "$MODEL" -p "Once upon a time" --press "$press" --budget "$BUDGET" -n "$TOKENS" \
    --ignore-eos -q -t "${THREADS:-1}" --stats-json "$OUT/long_$press.json"
  python3 - "$OUT/long_$press.json" "$press" "$BUDGET" >> "$OUT/long_generation.csv" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]},{sys.argv[3]},{d['generated_tokens']},{d['stop_reason']},{d['kv_entries']},"
      f"{d['kv_resident_bytes']},{d['kv_peak_resident_bytes']},{d['decode_tokens_per_second']:.1f},{d['peak_rss_bytes']}")
PY
  rm -f "$OUT/long_$press.json"
done
cat "$OUT/long_generation.csv"
