#!/usr/bin/env bash
# KVzip's prefill against the uncompressed one on SmolLM2-135M-Instruct Q4_1 (scripts/model_path.sh
# smollm2-135m): a prompt of N tokens (default 1024) from data/text/pg_essays/addiction.txt, 2 threads,
# uncompressed and `kvzip --ratio 0.5` alternated REPEATS times (default 3); prints each prefill's seconds
# (kvc-generate's prefill_seconds) and the medians' ratio.
#   recipes/kvzip_prefill_cost.sh
#   N=2048 REPEATS=5 recipes/kvzip_prefill_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
M=$(scripts/model_path.sh smollm2-135m)
P=data/text/pg_essays/addiction.txt
N=${N:-1024}
REPEATS=${REPEATS:-3}
# KVC_SMOKE=1 (the documentation's tests): a short prompt, once.
if [ -n "${KVC_SMOKE:-}" ]; then N=64; REPEATS=1; fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for i in $(seq 1 "$REPEATS"); do
  for press in none kvzip; do
    extra=""; [ "$press" = kvzip ] && extra="--ratio 0.5"
    build/bin/kvc-generate -m "$M" -f "$P" --prompt-tokens "$N" -n 1 -t 2 -q --press "$press" $extra \
      --json-out "$OUT/${press}_$i.json" > /dev/null
  done
done
python3 - "$OUT" "$REPEATS" <<'PY'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
seconds = {p: [json.load(open(f"{out}/{p}_{i}.json"))["prefill_seconds"] for i in range(1, repeats + 1)]
           for p in ("none", "kvzip")}
for p, s in seconds.items():
    print(p, " / ".join(f"{x:.2f}" for x in s), "s; median", f"{statistics.median(s):.2f}")
print(f"kvzip / uncompressed: {statistics.median(seconds['kvzip']) / statistics.median(seconds['none']):.2f}x")
PY
