#!/usr/bin/env bash
# KVCompose's task sets on kvc-tiny-lm's needle grid (the settings of eviction_needle.sh: lengths 512 and
# 1000 x 5 depths x 4 samples, seed 0), query-aware and query-agnostic, at ratios 0.25/0.5/0.9:
#   task=window  the prompt's last 32 tokens (its question, when aware), scores pooled over 5 tokens (the
#                setting of the other committed eviction tables)
#   task=repeat  a copy of the prompt fed after it, the paper's task-agnostic set and kvpress's scoring (with
#                kernel=1, the default)
#   task=all     the prompt's own tokens, causally (each token scored only by the queries after it)
# Writes OUT/kvcompose_tasks.{jsonl,md}.
# Usage: BUILD=build recipes/kvcompose_tasks_needle.sh [OUT_DIR]   (~4 min at -t 1 on an idle 2-core box)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${BUILD:-$ROOT/build}" && pwd)
cd "$ROOT"
OUT=${1:-data/results/eviction/needle}
RATIOS=${RATIOS:-"0.25 0.5 0.9"}
SPECS=${SPECS:-"kvcompose:task=window,kernel=5 kvcompose:task=repeat,kernel=1 kvcompose:task=all,kernel=1"}
LENGTHS=${LENGTHS:-512,1000}; DEPTHS=${DEPTHS:-0,0.25,0.5,0.75,1}; SAMPLES=${SAMPLES:-4}
if [ -n "${KVC_SMOKE:-}" ]; then RATIOS=0.5; SPECS="kvcompose:task=repeat,kernel=1"; LENGTHS=256; DEPTHS=0.5; SAMPLES=1; fi
# Measured on kvc-tiny-lm (2.4M parameters, from ../shared: scripts/model_path.sh); the smoke run uses the
# repository's kvc-micro-lm.
. recipes/lib/needle_model.sh
MODEL=$(needle_model)
mkdir -p "$OUT"
: > "$OUT/kvcompose_tasks.jsonl"
for spec in $SPECS; do
  for mode in aware agnostic; do
    for ratio in $RATIOS; do
      echo "kvcompose_tasks_needle: $spec $mode $ratio" >&2
      "$BUILD/bin/kvc-eval" needle -m "$MODEL" --haystack data/text/pg_essays --lengths "$LENGTHS" \
        --depths "$DEPTHS" --samples "$SAMPLES" --seed 0 --press "$spec" --ratio "$ratio" --query "$mode" -t 1 --json |
        python3 -c 'import json, sys; d = json.load(sys.stdin); print(json.dumps({"press": sys.argv[1], "query": sys.argv[2], "ratio": float(sys.argv[3]), "accuracy": d["accuracy"]}))' \
          "$spec" "$mode" "$ratio" >> "$OUT/kvcompose_tasks.jsonl"
    done
  done
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/kvcompose_tasks.jsonl")]
cols = sorted({(r["query"] != "aware", r["ratio"]) for r in rows})
head = [("aware" if not a else "agnostic") + f"@{r:g}" for a, r in cols]
lines = ["| press | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
for spec in dict.fromkeys(r["press"] for r in rows):
    cell = {(r["query"] != "aware", r["ratio"]): r["accuracy"] for r in rows if r["press"] == spec}
    lines.append(f"| `{spec}` | " + " | ".join(f"{cell[c]:.3f}" if c in cell else "" for c in cols) + " |")
open(f"{out}/kvcompose_tasks.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
