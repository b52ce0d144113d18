#!/bin/sh
# Re-renders every figure of a result folder from the .gp/.dat files kvc-eval wrote next to them
# (e.g. after editing a .gp script's style). Usage: recipes/replot.sh RESULT_DIR
set -eu
DIR=${1:?usage: recipes/replot.sh RESULT_DIR}
command -v gnuplot >/dev/null || { echo "replot: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
cd "$DIR"
for gp in *.gp; do
  [ -e "$gp" ] || { echo "replot: no .gp files in $DIR" >&2; exit 1; }
  gnuplot "$gp" && echo "rendered ${gp%.gp}.png"
done
