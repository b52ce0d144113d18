#!/usr/bin/env bash
# Needle accuracy of every registered eviction method on kvc-tiny-lm at ratios 0.25/0.5/0.75/0.9 plus the
# uncompressed baseline, query-aware (question prefilled with the context, compression sees it) and
# query-agnostic (context prefilled and compressed, question fed after). kvc-eval sweep, resumable:
# re-run after an interruption to finish. 40 samples per method and ratio (lengths 512 and 1000 ×
# depths 0..1 × 4 samples), seed 0. Writes OUT/{aware,agnostic}/ (sweep cells in results.jsonl.gz,
# tables, plots) and the combined OUT/needle.csv, needle.md, needle.png.
# Usage: BUILD=build recipes/eviction_needle.sh [OUT_DIR]   (~17 min at -t 1 on an idle 2-core box)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${BUILD:-$ROOT/build}" && pwd)
# Relative paths from the repository root: the sweep keys its resumable cells on the exact arguments.
cd "$ROOT"
OUT=${1:-data/results/eviction/needle}
HAYSTACK=${HAYSTACK:-data/text/pg_essays}
THREADS=${THREADS:-1}
MODES=${MODES:-"aware agnostic"}
METHODS=${METHODS:-all}; RATIOS=${RATIOS:-0.25,0.5,0.75,0.9}; LENGTHS=${LENGTHS:-512,1000}; DEPTHS=${DEPTHS:-0,0.25,0.5,0.75,1}
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then METHODS=none,snapkv; RATIOS=0.5; LENGTHS=256; DEPTHS=0.5; fi
# Measured on kvc-tiny-lm (2.4M parameters, from ../shared: scripts/model_path.sh); the smoke run uses the
# repository's kvc-micro-lm.
. recipes/lib/needle_model.sh
. recipes/lib/committed_results.sh
. recipes/lib/committed_settings.sh  # dynamickv and kvcompose* run the settings of the committed results
MODEL=$(needle_model)
for mode in $MODES; do
  echo "eviction_needle: query-$mode" >&2
  unpack_results "$OUT/$mode"
  "$BUILD/bin/kvc-eval" sweep -m "$MODEL" --methods "$METHODS" "${COMMITTED_METHOD_SPECS[@]}" --ratios "$RATIOS" --tasks needle \
    --haystack "$HAYSTACK" --needle-lengths "$LENGTHS" --needle-depths "$DEPTHS" --samples 4 --seed 0 \
    --query "$mode" -t "$THREADS" --out "$OUT/$mode"
done
python3 - "$OUT" $MODES <<'PY'
import json, sys, collections
out, modes = sys.argv[1], sys.argv[2:]
acc = collections.OrderedDict()  # (method) -> {(mode, ratio): (accuracy, measured ratio, samples)}
for mode in modes:
    for line in open(f"{out}/{mode}/results.jsonl"):
        r = json.loads(line)
        res = r["result"]
        acc.setdefault(r["method"], {})[(mode, r["ratio"])] = (res["score"], res["compression_ratio"], len(res["samples"]))
ratios = [0.25, 0.5, 0.75, 0.9]
with open(f"{out}/needle.csv", "w") as f:
    f.write("query,method,ratio,measured_ratio,accuracy,samples\n")
    for m, cells in acc.items():
        for (mode, q), (a, mr, n) in sorted(cells.items()):
            f.write(f"{mode},{m},{q},{mr:.4f},{a:.4f},{n}\n")
base = {mode: acc["none"][(mode, 0.0)][0] for mode in modes}
md = ["| method | " + " | ".join(f"{mode[:3]}@{q}" for mode in modes for q in ratios) + " |",
      "|---" * (1 + len(modes) * len(ratios)) + "|"]
for m, cells in acc.items():
    if m == "none":
        continue
    md.append(f"| {m} | " + " | ".join(f"{cells[(mode, q)][0]:.3f}" if (mode, q) in cells else "" for mode in modes
                                       for q in ratios) + " |")
n = acc["none"][(modes[0], 0.0)][2]
note = ", ".join(f"query-{mode} {base[mode]:.3f}" for mode in modes)
open(f"{out}/needle.md", "w").write(
    "Needle accuracy on kvc-tiny-lm (exact match of the 5-digit number; "
    f"{n} samples per cell: lengths 512/1000 × depths 0/0.25/0.5/0.75/1 × 4). "
    "`awa` = query-aware, `agn` = query-agnostic.\n\n" + "\n".join(md) +
    f"\n\nUncompressed: {note}.\n")
methods = [m for m in acc if m != "none"]
for mode in modes:
    with open(f"{out}/needle_{mode}.dat", "w") as f:
        f.write("# ratio " + " ".join(methods) + "\n")
        for q in ratios:
            f.write(f"{q} " + " ".join(f"{acc[m][(mode, q)][0]:.4f}" if (mode, q) in acc[m] else "NaN" for m in methods) + "\n")
gp = ["set terminal pngcairo size 1300,520 font 'sans,10' noenhanced", f"set output '{out}/needle.png'",
      f"set multiplot layout 1,{len(modes)}", "set xlabel 'compression ratio'", "set ylabel 'needle accuracy'",
      "set yrange [0:1.05]", "set xrange [0.2:0.95]", "set grid", "set key top right font ',8'"]
for mode in modes:
    gp += [f"set title 'kvc-tiny-lm needle, query-{mode} (uncompressed {base[mode]:.3f})'",
           "plot " + ", ".join(f"'{out}/needle_{mode}.dat' using 1:{i + 2} with linespoints title '{m}'"
                               for i, m in enumerate(methods)) +
           f", {base[mode]} with lines dashtype 2 lc rgb 'black' title 'none'"]
gp.append("unset multiplot")
open(f"{out}/needle.gp", "w").write("\n".join(gp) + "\n")
PY
if command -v gnuplot > /dev/null; then gnuplot "$OUT/needle.gp"; fi
for mode in $MODES; do pack_results "$OUT/$mode"; done
cat "$OUT/needle.md"
