#!/usr/bin/env bash
# Builds kvc against the LibTorch inside PyPI's torch wheel (2.x) and runs the whole test suite (ctest).
# Usage: scripts/build_torch2.sh [build-dir]
#   KVC_PYTHON   a python3 whose torch to build against (default: a venv at KVC_TORCH_VENV, made and
#                filled from PyPI when it has no torch)
#   KVC_TORCH_VENV (default ~/.cache/kvc-torch), KVC_TORCH_SPEC (default torch==2.11.0), KVC_JOBS (default 2),
#   KVC_PREFIX_PATH (more CMake prefixes, e.g. unpacked dependencies), KVC_CMAKE_ARGS, KVC_BUILD_ARGS (for the build tool, e.g. -k), KVC_CTEST_ARGS,
#   KVC_CONFIGURE_ONLY=1 / KVC_BUILD_ONLY=1 (stop after configuring / building)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build-torch2}"
JOBS="${KVC_JOBS:-2}"
VENV="${KVC_TORCH_VENV:-$HOME/.cache/kvc-torch}"
PYTHON="${KVC_PYTHON:-$VENV/bin/python3}"
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  [ -n "${KVC_PYTHON:-}" ] && { echo "build_torch2: $PYTHON has no torch" >&2; exit 1; }
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "${KVC_TORCH_SPEC:-torch==2.11.0}"
fi
TORCH_CMAKE=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
TORCH_ROOT=$(dirname "$(dirname "$TORCH_CMAKE")")
# Torch's CMake files search the system before the wheel: with Debian's LibTorch installed they would
# mix its libtorch.so and Caffe2 config in, so the wheel's folders go first.
args=(-DCMAKE_BUILD_TYPE=Release "-DTorch_DIR=$TORCH_CMAKE/Torch" "-DCaffe2_DIR=$TORCH_CMAKE/Caffe2"
      "-DCMAKE_PREFIX_PATH=$TORCH_ROOT${KVC_PREFIX_PATH:+;$KVC_PREFIX_PATH}")
# PyPI's Linux wheel is a CUDA build: Torch's CMake files look for the CUDA toolkit (nvcc) to configure.
if command -v nvcc >/dev/null; then
  args+=("-DCMAKE_CUDA_COMPILER=$(command -v nvcc)")
elif [ -x /usr/local/cuda/bin/nvcc ]; then
  args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
start=$SECONDS
cmake -S . -B "$BUILD_DIR" "${args[@]}" ${KVC_CMAKE_ARGS:-}
[ -n "${KVC_CONFIGURE_ONLY:-}" ] && exit 0
cmake --build "$BUILD_DIR" -j"$JOBS" ${KVC_BUILD_ARGS:+-- $KVC_BUILD_ARGS}
echo "build_torch2: built in $((SECONDS - start)) s"
[ -n "${KVC_BUILD_ONLY:-}" ] && exit 0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" ${KVC_CTEST_ARGS:-}
echo "build_torch2: built and tested in $((SECONDS - start)) s"
