#!/usr/bin/env bash
# CPU benchmark of a 134M-parameter random-weight Llama (Llama-2 tokenizer) at 512, 2K and 8K context,
# against this machine's measured memory bandwidth and GEMM peak. Writes data/results/bench/cpu.json.
# Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
CKPT="${KVC_BENCH_CKPT:-/tmp/kvc-llama-125m-16k}"
[ -f "$CKPT/model.safetensors" ] || "$BIN/kvc-make-checkpoint" --preset llama-125m --context 16384 \
  --tokenizer @@LLAMA2TOK@@ -o "$CKPT"
mkdir -p data/results/bench
"$BIN/kvc-bench" -m "$CKPT" --contexts 512,2048,8192 --decode-tokens 32 --json data/results/bench/cpu.json \
  | tee data/results/bench/cpu.txt
