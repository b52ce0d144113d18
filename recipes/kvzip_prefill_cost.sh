#!/bin/bash
# KVzip's prefill against the uncompressed one on SmolLM2-135M, alternated, 3 repeats each.
set -e
M=$(scripts/model_path.sh smollm2-135m)
P=data/text/pg_essays/addiction.txt
N=${N:-1024}
OUT=${OUT:-$(mktemp -d)}
# Run from the repository root after building kvc-generate; prints each prefill's seconds.
for i in 1 2 3; do
  for press in none kvzip; do
    extra=""; [ "$press" = kvzip ] && extra="--ratio 0.5"
    build/bin/kvc-generate -m "$M" -f $P --prompt-tokens $N -n 1 -t 2 -q --press $press $extra --json-out $OUT/kvzip_cost_${press}_$i.json
    python3 -c "import json;d=json.load(open('$OUT/kvzip_cost_${press}_$i.json'));print('$press',$i,d['prefill_seconds'])"
  done
done
