#!/usr/bin/env bash
# Plots of the matched-memory results: KL against the exact model (log scale) over the kept share, one
# line per method, one plot per model and domain, from data/results/lowrank/matched_memory.jsonl
# (recipes/lowrank_matched_memory.sh) and matched_memory_gemma3.json (recipes/lowrank_matched_memory_gemma.sh)
# when present. Writes data/results/lowrank/matched_memory_<model>_<domain>.png (needs gnuplot).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-data/results/lowrank}
OUT=$DIR
# The smoke run plots the committed results into a scratch folder.
if [ -n "${KVC_SMOKE:-}" ]; then DIR="$(dirname "$(readlink -f "$0")")/../data/results/lowrank"; OUT=$(mktemp -d); fi
command -v gnuplot > /dev/null || { echo "lowrank_matched_memory_plots.sh: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$DIR" "$OUT" "$work" <<'PY'
import json, pathlib, sys
src, out, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
rows = [json.loads(line) for line in (src / "matched_memory.jsonl").read_text().splitlines() if line.strip()]
gemma = src / "matched_memory_gemma3.json"
if gemma.exists():
    rows += [dict(r, model="gemma3-270m") for r in json.loads(gemma.read_text())["rows"]]
script = ["set terminal pngcairo size 800,500 noenhanced", "set key top right", "set logscale y",
          "set xlabel 'kept share of the cache'", "set ylabel 'mean KL vs exact model (nats)'"]
for model in dict.fromkeys(r["model"] for r in rows):
    for domain in dict.fromkeys(r["domain"] for r in rows if r["model"] == model):
        sel = [r for r in rows if r["model"] == model and r["domain"] == domain]
        plots = []
        for method in dict.fromkeys(r["method"] for r in sel):
            points = sorted((r["kept_share"], r["kl"]) for r in sel if r["method"] == method)
            data = work / f"{model}_{domain}_{method.replace(' ', '_').replace('(', '').replace(')', '')}.dat"
            data.write_text("".join(f"{x} {y}\n" for x, y in points))
            plots.append(f"'{data}' using 1:2 with linespoints title '{method}'")
        script += [f"set output '{out / f'matched_memory_{model}_{domain}.png'}'",
                   f"set title '{model}, {domain}: KL at matched memory'", "plot " + ", ".join(plots)]
(work / "plots.gp").write_text("\n".join(script) + "\n")
PY
gnuplot "$work/plots.gp"
ls "$OUT"/matched_memory_*.png
