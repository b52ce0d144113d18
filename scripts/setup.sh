#!/usr/bin/env bash
# Installs everything kvc needs from Debian bookworm packages (run as root or with sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# --no-install-recommends keeps LibTorch from pulling in desktop libraries (GUIDE.md §1).
# libopenblas0-pthread: without it LibTorch's matrix products fall back to the reference BLAS (~25x slower).
$SUDO apt-get install -y -qq --no-install-recommends \
  g++ cmake make pkg-config git ccache \
  libtorch-dev libopenblas0-pthread \
  libsentencepiece-dev libcli11-dev libfmt-dev nlohmann-json3-dev libgtest-dev \
  gnuplot-nox python3
echo "kvc: dependencies installed"
