#!/usr/bin/env bash
# kvc-train on one process and on two ranks (one thread each, c10d/Gloo over 127.0.0.1) with the same
# global batch: wall time of each, the time rank 0 spent adding up gradients (waits for the slower rank
# included), and the largest difference between the two runs' gates.
# Writes data/results/distributed/train.{json,md}. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
FILES=(data/text/pg_essays/*.txt)
STEPS=${KVC_STEPS:-100}
BATCH=${KVC_BATCH:-8}
PORT=${MASTER_PORT:-29532}
OUT=data/results/distributed
TOKENS=20000
if [ -n "${KVC_SMOKE:-}" ]; then STEPS=2; BATCH=2; TOKENS=4000; OUT=$(mktemp -d); fi
# Measured on kvc-tiny-lm (2.4M parameters, from ../shared: scripts/model_path.sh); the smoke run uses the
# repository's kvc-micro-lm.
. recipes/lib/needle_model.sh
MODEL=$(needle_model)
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BIN/kvc-calibrate" -m "$MODEL" -f "${FILES[@]}" --tokens "$TOKENS" -t 1 -o "$work/bases.safetensors" > /dev/null
args=(-m "$MODEL" --bases "$work/bases.safetensors" -f "${FILES[@]}" --steps "$STEPS" --batch "$BATCH" -c 128
      --alpha 4 --eval-every 0 -t 1 --json)

source recipes/lib/one_process_vs_two_ranks.sh
one_process_vs_two_ranks "$BIN/kvc-train" "$PORT" "$work" "${args[@]}"

python3 - "$work" "$OUT" "$T0" "$T1" "$T2" "$STEPS" "$BATCH" "$(basename "$MODEL")" <<'PY'
import json, pathlib, sys
sys.path.insert(0, "recipes/lib")
from safetensors_floats import float_tensors
work, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
t0, t1, t2 = map(float, sys.argv[3:6])
steps, batch = int(sys.argv[6]), int(sys.argv[7])
one, two = json.loads((work / "one.json").read_text()), json.loads((work / "rank0.json").read_text())

x, y = float_tensors(work / "one.safetensors", "F32"), float_tensors(work / "two.safetensors", "F32")
worst = max(abs(p - q) for k, v in x.items() for p, q in zip(v, y[k]))
result = {"model": sys.argv[-1], "steps": steps, "batch": batch, "seq_len": 128, "tokens": one["tokens"],
          "seconds_one_process": t1 - t0, "seconds_two_ranks": t2 - t1, "speedup": (t1 - t0) / (t2 - t1),
          "rank0_exchange_seconds": two["exchange_seconds"], "max_gate_difference": worst,
          "train_tokens_per_second_one_process": one["evals"][-1]["tokens_per_second"],
          "train_tokens_per_second_two_ranks": two["evals"][-1]["tokens_per_second"],
          "final_ce_one_process": one["final_ce"], "final_ce_two_ranks": two["final_ce"]}
lines = [f"kvc-train, {sys.argv[-1]}, {steps} steps of {batch} windows of 128 tokens ({one['tokens']} tokens), one "
         "thread per process (wall time includes loading the model and tokenizing):", "",
         "| run | wall s | training tok/s | rank 0 adding up gradients (waits included), s | gates vs one process (max abs difference) |",
         "|---|---|---|---|---|",
         f"| 1 process | {t1 - t0:.2f} | {result['train_tokens_per_second_one_process']:.0f} | — | — |",
         f"| 2 ranks (Gloo, 127.0.0.1) | {t2 - t1:.2f} ({result['speedup']:.2f}× faster) | "
         f"{result['train_tokens_per_second_two_ranks']:.0f} | {two['exchange_seconds']:.3f} | {worst:.1e} |"]
(out / "train.json").write_text(json.dumps(result, indent=1) + "\n")
(out / "train.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
