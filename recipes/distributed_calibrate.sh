#!/usr/bin/env bash
# kvc-calibrate on one process and on two ranks (one thread each, c10d/Gloo over 127.0.0.1) on the same
# windows: wall time of each, the time rank 0 spent waiting for and adding up the sums, and the largest
# difference between the two runs' eigenvalues (relative to the largest one).
# Writes data/results/distributed/calibrate.{json,md}. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
FILES=(data/text/pg_essays/*.txt)
TOKENS=${KVC_TOKENS:-200000}
PORT=${MASTER_PORT:-29531}
OUT=data/results/distributed
if [ -n "${KVC_SMOKE:-}" ]; then TOKENS=4000; OUT=$(mktemp -d); fi
# Measured on kvc-tiny-lm (2.4M parameters, from ../shared: scripts/model_path.sh); the smoke run uses the
# repository's kvc-micro-lm.
. recipes/lib/needle_model.sh
MODEL=$(needle_model)
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(-m "$MODEL" -f "${FILES[@]}" --tokens "$TOKENS" --ctx-size 256 -t 1 --json)

source recipes/lib/one_process_vs_two_ranks.sh
one_process_vs_two_ranks "$BIN/kvc-calibrate" "$PORT" "$work" "${args[@]}"

python3 - "$work" "$OUT" "$T0" "$T1" "$T2" "$(basename "$MODEL")" <<'PY'
import json, pathlib, sys
sys.path.insert(0, "recipes/lib")
from safetensors_floats import float_tensors
work, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
t0, t1, t2 = map(float, sys.argv[3:6])
one, two = json.loads((work / "one.json").read_text()), json.loads((work / "rank0.json").read_text())

x, y = float_tensors(work / "one.safetensors", "F64"), float_tensors(work / "two.safetensors", "F64")
worst = max(abs(p - q) / max(abs(v[0]), 1e-300) for k, v in x.items() for p, q in zip(v, y[k]))
result = {"model": sys.argv[-1], "tokens": one["tokens"], "tokens_two_ranks": two["tokens"],
          "seconds_one_process": t1 - t0, "seconds_two_ranks": t2 - t1, "speedup": (t1 - t0) / (t2 - t1),
          "rank0_exchange_seconds": two["exchange_seconds"], "max_eigenvalue_difference_relative": worst}
lines = [f"kvc-calibrate, {sys.argv[-1]}, {one['tokens']} tokens in windows of 256, one thread per process "
         "(wall time includes loading the model and tokenizing):", "",
         "| run | wall s | rank 0 waiting for and adding up the sums, s | eigenvalues vs one process (max, relative) |",
         "|---|---|---|---|",
         f"| 1 process | {t1 - t0:.2f} | — | — |",
         f"| 2 ranks (Gloo, 127.0.0.1) | {t2 - t1:.2f} ({result['speedup']:.2f}× faster) | {two['exchange_seconds']:.3f} | {worst:.1e} |"]
(out / "calibrate.json").write_text(json.dumps(result, indent=1) + "\n")
(out / "calibrate.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
