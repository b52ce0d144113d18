#!/usr/bin/env bash
# CPU benchmark of a 134M-parameter random-weight Llama at 512, 2K and 8K context,
# against this machine's measured memory bandwidth and GEMM peak. Writes data/results/bench/cpu.json.
# Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
CKPT="${KVC_BENCH_CKPT:-/tmp/kvc-llama-125m-16k}"
CONTEXTS=512,2048,8192
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then CKPT=/tmp/kvc-smoke-bench; CONTEXTS=128; fi
# kvc-bench feeds token ids, so the checkpoint needs no tokenizer.
[ -f "$CKPT/model.safetensors" ] || "$BIN/kvc-make-checkpoint" --preset llama-125m --context 16384 -o "$CKPT"
mkdir -p data/results/bench
"$BIN/kvc-bench" -m "$CKPT" --contexts "$CONTEXTS" --decode-tokens 32 --json-out data/results/bench/cpu.json \
  | tee data/results/bench/cpu.txt
