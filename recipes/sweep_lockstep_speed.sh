#!/usr/bin/env bash
# kvc-eval sweep's decoding in lockstep against one cell at a time, same run: the cells of one shared prefill
# decoded 16 at a time (--lockstep 16, the default) and one at a time (--lockstep 1), alternated REPEATS times
# (default 3), THREADS threads (default 2). Gemma 3 270M with float32 weights, as its leaderboard runs it
# (scripts/model_path.sh gemma3-270m), one 4,096-token needle at depth 0.5, METHODS at four ratios plus the
# uncompressed cell (29 cells). Each round prints both sides' decode seconds (the sweep's
# prefill.decode_seconds: question passes and decoding) and wall seconds; the last line gives the medians and
# the median of the rounds' ratios, and the recipe fails unless both sides give the same results (predictions,
# scores, cache bytes) in every round.
#   recipes/sweep_lockstep_speed.sh
#   REPEATS=5 THREADS=1 recipes/sweep_lockstep_speed.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
METHODS=${METHODS:-none,snapkv,pyramidkv,tova,h2o,streaming_llm,expected_attention,keydiff}
LENGTH=4096
# KVC_SMOKE=1 (the documentation's tests): the repository's needle model, a short prompt, once.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; LENGTH=256; REPEATS=1; METHODS=none,snapkv,h2o
fi
MODEL=${MODEL:-$(scripts/model_path.sh gemma3-270m)}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for round in $(seq "$REPEATS"); do
  for lockstep in 1 16; do
    "$BIN/kvc-eval" sweep -m "$MODEL" --dtype float32 --methods "$METHODS" --ratios 0.25,0.5,0.75,0.9 --tasks needle \
      --haystack data/text/pg_essays --needle-lengths "$LENGTH" --needle-depths 0.5 --samples 1 --seed 0 \
      -t "$THREADS" --lockstep "$lockstep" --out-dir "$WORK/$round-$lockstep" --json > "$WORK/$round-$lockstep.json" \
      2> "$WORK/$round-$lockstep.log" || { cat "$WORK/$round-$lockstep.log" >&2; exit 1; }
  done
done
python3 - "$WORK" "$REPEATS" <<'PY'
import json, statistics, sys
work, repeats = sys.argv[1], int(sys.argv[2])

def cells(folder):
    out = {}
    for line in open(f"{folder}/results.jsonl"):
        r = json.loads(line)
        samples = r["result"]["samples"]
        for s in samples:
            s.pop("seconds", None)
        out[(r["method"], r["ratio"])] = samples
    return out

reference = cells(f"{work}/1-1")
ratios, decode = [], {1: [], 16: []}
print("round  decode_s(lockstep 1)  decode_s(lockstep 16)  wall_s(1)  wall_s(16)  ratio")
for round in range(1, repeats + 1):
    summary = {n: json.load(open(f"{work}/{round}-{n}.json")) for n in (1, 16)}
    for n in (1, 16):
        if cells(f"{work}/{round}-{n}") != reference:
            sys.exit(f"round {round}, --lockstep {n}: results differ from round 1's --lockstep 1")
        decode[n].append(summary[n]["prefill"]["decode_seconds"])
    ratios.append(decode[1][-1] / decode[16][-1])
    print(f"{round:5d}  {decode[1][-1]:20.2f}  {decode[16][-1]:21.2f}  {summary[1]['wall_seconds']:9.2f}  "
          f"{summary[16]['wall_seconds']:10.2f}  {ratios[-1]:5.2f}")
print(f"{len(reference)} cells, the same results on both sides; median decode {statistics.median(decode[1]):.2f} s "
      f"one cell at a time, {statistics.median(decode[16]):.2f} s in lockstep; median ratio {statistics.median(ratios):.2f}x")
PY
