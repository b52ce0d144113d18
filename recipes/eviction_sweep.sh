#!/usr/bin/env bash
# KL divergence, top-1 agreement and perplexity of every eviction method on stories260K at ratios
# 0.25/0.5/0.75/0.9 (kvc-eval kl: 8 windows of 256 tokens, first half prefilled and compressed, the
# rest decoded token by token). Writes data/results/eviction/sweep.jsonl, sweep.csv and plots.
# PRESSES=... re-runs only those methods: their rows are replaced, the others' kept.
# Usage: recipes/eviction_sweep.sh [BUILD_DIR] [OUT_DIR]   (or BUILD=dir; e.g. PRESSES=d2o BUILD=build)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/recipes/lib/committed_settings.sh"  # dynamickv and kvcompose* run the settings of the committed results
BIN=${1:-${BUILD:-$ROOT/build}}/bin
OUT=${2:-$ROOT/data/results/eviction}
MODEL=${MODEL:-$ROOT/data/models/stories260K}
DATA=${DATA:-$ROOT/data/text/tinystories/tinystories_excerpt_30k.txt}
THREADS=${THREADS:-1}
PRESSES=${PRESSES:-"streaming_llm h2o tova snapkv pyramidkv knorm random dynamickv d2o kvcompose kvcompose_unstructured ada"}
RATIOS=${RATIOS:-"0.25 0.5 0.75 0.9"}
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then PRESSES="snapkv d2o"; RATIOS="0.5"; fi

mkdir -p "$OUT"
touch "$OUT/sweep.jsonl"
python3 - "$OUT/sweep.jsonl" $PRESSES <<'PY'
import json, sys
path, rerun = sys.argv[1], set(sys.argv[2:])
kept = [l for l in open(path) if l.strip() and json.loads(l)["press"] not in rerun]
open(path, "w").writelines(kept)
PY
for press in $PRESSES; do
  for ratio in $RATIOS; do
    echo "eviction_sweep: $press ratio=$ratio" >&2
    "$BIN/kvc-eval" kl -m "$MODEL" --file "$DATA" --window 256 --max-windows 8 -t "$THREADS" \
      --press "$(press_spec "$press")" --ratio "$ratio" --json 2>/dev/null |
      python3 -c "import json,sys; d=json.load(sys.stdin); d['press']='$press'; d['ratio']=$ratio; print(json.dumps(d))" \
      >> "$OUT/sweep.jsonl"
  done
done
python3 - "$OUT" <<'PY'
import json, sys, collections
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/sweep.jsonl")]
order = "streaming_llm h2o tova snapkv pyramidkv knorm random dynamickv d2o kvcompose kvcompose_unstructured ada".split()
rows.sort(key=lambda r: order.index(r['press']) if r['press'] in order else len(order))  # stable: ratios stay in order
with open(f"{out}/sweep.csv", "w") as f:
    f.write("press,ratio,measured_ratio,mean_kl,top1_agreement,ppl_reference,ppl_compressed\n")
    for r in rows:
        f.write(f"{r['press']},{r['ratio']},{r['compression_ratio']:.4f},{r['kl']:.5f},{r['top1_agreement']:.4f},"
                f"{r['ppl_reference']:.4f},{r['ppl_compressed']:.4f}\n")
by = collections.defaultdict(dict)
for r in rows: by[r['press']][r['ratio']] = r
ratios = sorted({r['ratio'] for r in rows})
for metric in ("kl", "ppl_compressed"):
    with open(f"{out}/{metric}.dat", "w") as f:
        f.write("# ratio " + " ".join(by) + "\n")
        for q in ratios: f.write(f"{q} " + " ".join(f"{by[p][q][metric]:.6g}" for p in by) + "\n")
md = ["| method | " + " | ".join(f"KL@{q}" for q in ratios) + " | " + " | ".join(f"ppl@{q}" for q in ratios) + " |",
      "|---" * (1 + 2 * len(ratios)) + "|"]
for p in by:
    md.append(f"| {p} | " + " | ".join(f"{by[p][q]['kl']:.4f}" for q in ratios) + " | " +
              " | ".join(f"{by[p][q]['ppl_compressed']:.3f}" for q in ratios) + " |")
ref = rows[0]['ppl_reference']
open(f"{out}/sweep.md", "w").write("\n".join(md) + f"\n\nUncompressed perplexity on the same tokens: {ref:.3f}\n")
names = list(by)
gp = ["set terminal pngcairo size 900,550 noenhanced", "set key outside right", "set xlabel 'compression ratio'", "set logscale y"]
for metric, label in (("kl", "mean KL vs exact (nats)"), ("ppl_compressed", "perplexity")):
    gp += [f"set output '{out}/{metric}.png'", f"set ylabel '{label}'", f"set title 'stories260K: {label}'",
           "plot " + ", ".join(f"'{out}/{metric}.dat' using 1:{i+2} with linespoints title '{n}'" for i, n in enumerate(names))]
open(f"{out}/plots.gp", "w").write("\n".join(gp) + "\n")
PY
if command -v gnuplot > /dev/null; then gnuplot "$OUT/plots.gp"; fi
cat "$OUT/sweep.md"
