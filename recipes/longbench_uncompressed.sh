#!/usr/bin/env bash
# LongBench on the uncompressed models: every .jsonl file of a folder (LongBench's data/ folder as its
# release unpacks, or the repository's LongBench-format example), scored as eval.py scores it, with the
# samples run and the seconds each data set took. Writes data/results/longbench/<model>/ (the JSON and
# predictions of every set) and data/results/longbench/summary.md.
#   recipes/longbench_uncompressed.sh                                   # data/text/longbench
#   LONGBENCH_DATA=~/LongBench/data KVC_SAMPLES=50 recipes/longbench_uncompressed.sh
# Gemma 3 270M keeps LongBench's 4K-model prompt length (GEMMA_MAX_LENGTH, default 3500; its context is
# 32K, LongBench uses 31500 for 32K models); the bundled 1,024-token models keep their context less each
# set's generation length. KVC_SAMPLES caps the samples per set (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
DATA=${LONGBENCH_DATA:-data/text/longbench}
SAMPLES=${KVC_SAMPLES:-0}
GEMMA_MAX_LENGTH=${GEMMA_MAX_LENGTH:-3500}
OUT=data/results/longbench
# KVC_SMOKE=1 (the README test suite): one sample per set and model, into a scratch folder.
if [ -n "${KVC_SMOKE:-}" ]; then SAMPLES=1; OUT=$(mktemp -d); fi
shopt -s nullglob
FILES=("$DATA"/*.jsonl)
[ ${#FILES[@]} -gt 0 ] || { echo "longbench_uncompressed.sh: no .jsonl files in $DATA" >&2; exit 1; }
GGUF=$(scripts/model_path.sh gemma3-270m)
run() {  # run NAME MODEL MAX_LENGTH
  rm -rf "${OUT:?}/$1"
  for f in "${FILES[@]}"; do
    "$BIN/kvc-eval" longbench -m "$2" $(case "$2" in *.gguf) echo --dtype float32;; esac) -f "$f" --max-length "$3" --max-samples "$SAMPLES" --truncate middle \
      --length-buckets --out-dir "$OUT/$1"
  done
}
run gemma3-270m "$GGUF" "$GEMMA_MAX_LENGTH"
run kvc-micro-lm data/models/kvc-micro-lm 0
if [ -z "${KVC_SMOKE:-}" ] && TINY=$(scripts/model_path.sh kvc-tiny-lm 2>/dev/null); then run kvc-tiny-lm "$TINY" 0; fi
run stories260K data/models/stories260K 0
python3 - "$OUT" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
rows = ["| model | data set | metric | samples | truncated | score | seconds |", "|---|---|---|---|---|---|---|"]
for model in sorted(os.listdir(out)):
    for path in sorted(glob.glob(os.path.join(out, model, "longbench_*.json"))):
        r = json.load(open(path))
        score = "n/a" if r["longbench_score"] is None else f'{r["longbench_score"]:.2f}'
        rows.append(f'| {model} | {r["dataset"]} | {r["metric"]} | {r["samples_scored"]} | '
                    f'{r["truncated_samples"]} | {score} | {r["metadata"]["wall_seconds"]:.1f} |')
text = "\n".join(rows) + "\n"
open(os.path.join(out, "summary.md"), "w").write(text)
print(text, end="")
EOF
