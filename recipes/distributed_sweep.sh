#!/usr/bin/env bash
# kvc-eval sweep on one process and as two shards run side by side (one thread each, no connection
# between them), merged with kvc-eval merge: wall time of each and whether the merged table equals the
# one process's. Writes data/results/distributed/sweep.{json,md}. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
WINDOWS=${KVC_WINDOWS:-8}
OUT=data/results/distributed
if [ -n "${KVC_SMOKE:-}" ]; then WINDOWS=1; OUT=$(mktemp -d); fi
# Measured on kvc-tiny-lm (2.4M parameters, from ../shared: scripts/model_path.sh); the smoke run uses the
# repository's kvc-micro-lm.
. recipes/lib/needle_model.sh
MODEL=$(needle_model)
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(sweep -m "$MODEL" --methods none,snapkv,h2o,tova,streaming_llm --ratios 0.5,0.9 --tasks kl,ppl
      -f data/text/wikitext2/wiki.test.raw -c 256 --max-windows "$WINDOWS" -t 1 --json)

t0=$(date +%s.%N)
"$BIN/kvc-eval" "${args[@]}" --out-dir "$work/one" > /dev/null
t1=$(date +%s.%N)
for i in 0 1; do "$BIN/kvc-eval" "${args[@]}" --out-dir "$work/two" --shard $i/2 > /dev/null & done
wait
"$BIN/kvc-eval" merge --out-dir "$work/two" --json > "$work/merge.json"
t2=$(date +%s.%N)

same=false
cmp -s "$work/one/results.md" "$work/two/results.md" && same=true
cells=$(wc -l < "$work/one/results.jsonl")
python3 - "$OUT" "$t0" "$t1" "$t2" "$same" "$cells" "$WINDOWS" "$(basename "$MODEL")" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
t0, t1, t2 = map(float, sys.argv[2:5])
same, cells, windows = sys.argv[5] == "true", int(sys.argv[6]), int(sys.argv[7])
result = {"model": sys.argv[-1], "cells": cells, "windows": windows, "seconds_one_process": t1 - t0,
          "seconds_two_shards_and_merge": t2 - t1, "speedup": (t1 - t0) / (t2 - t1), "merged_table_identical": same}
lines = [f"kvc-eval sweep, {sys.argv[-1]}, {cells} cells (kl and ppl × 5 methods × 2 ratios, {windows} windows of 256), "
         "one thread per process (wall time includes loading the model in each process):", "",
         "| run | wall s | results.md equal to one process's |",
         "|---|---|---|",
         f"| 1 process | {t1 - t0:.2f} | — |",
         f"| 2 shards side by side + merge | {t2 - t1:.2f} ({result['speedup']:.2f}× faster) | {'yes' if same else 'NO'} |"]
(out / "sweep.json").write_text(json.dumps(result, indent=1) + "\n")
(out / "sweep.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if same else 1)
PY
