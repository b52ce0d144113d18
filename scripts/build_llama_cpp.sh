#!/usr/bin/env bash
# Builds llama.cpp's llama-perplexity, llama-tokenize, llama-bench and llama-completion, the peer that
# the Gemma 3 comparison recipe measures kvc against. The source is the copy vendored in the PyPI
# sdist of llama-cpp-python (PyPI is reachable where GitHub may not be), pinned so that numbers
# reproduce. CPU only, into .llama.cpp/ (git-ignored). Prints the bin folder.
#
#   scripts/build_llama_cpp.sh            # build once, then print .llama.cpp/build/bin
#   KVC_LLAMA_CPP_JOBS=4 scripts/build_llama_cpp.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${KVC_LLAMA_CPP_PYTHON_VERSION:-0.3.36}
dest="$root/.llama.cpp"
bin="$dest/build/bin"
tools=(llama-perplexity llama-tokenize llama-bench llama-completion)

have_all() { for t in "${tools[@]}"; do [[ -x "$bin/$t" ]] || return 1; done; }
if have_all; then echo "$bin"; exit 0; fi

mkdir -p "$dest"
src="$dest/llama_cpp_python-$version/vendor/llama.cpp"
if [[ ! -f "$src/CMakeLists.txt" ]]; then
  echo "downloading llama-cpp-python $version (sdist with llama.cpp's source) ..." >&2
  # --no-binary for this one package only: ":all:" would also build pip's build dependencies from source.
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" -d "$dest" >&2
  tar -xzf "$dest/llama_cpp_python-$version.tar.gz" -C "$dest"
fi
echo "building ${tools[*]} (CPU) ..." >&2
# The instruction sets that /proc/cpuinfo reports, spelled out rather than GGML_NATIVE: native would also
# enable AMX, whose tiles a virtual machine may not grant (the AMX kernels then die of SIGILL); and an
# instruction set the CPU lacks (AVX-512 on an AVX2 machine) would die the same way.
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
onoff() { if has "$@"; then echo ON; else echo OFF; fi; }
avx512=$(onoff avx512f avx512cd avx512vl avx512dq avx512bw)
# The AVX-512 extensions only on top of the base that GGML_AVX512 enables.
ext() { if [[ $avx512 == ON ]]; then onoff "$@"; else echo OFF; fi; }
isa=(-DGGML_SSE42=$(onoff sse4_2) -DGGML_AVX=$(onoff avx) -DGGML_AVX2=$(onoff avx2) -DGGML_FMA=$(onoff fma)
  -DGGML_F16C=$(onoff f16c) -DGGML_BMI2=$(onoff bmi2) -DGGML_AVX_VNNI=$(onoff avx_vnni)
  -DGGML_AVX512=$avx512 -DGGML_AVX512_VBMI=$(ext avx512vbmi) -DGGML_AVX512_VNNI=$(ext avx512_vnni)
  -DGGML_AVX512_BF16=$(ext avx512_bf16))
echo "instruction sets: ${isa[*]}" >&2
cmake -S "$src" -B "$dest/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF "${isa[@]}" \
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DGGML_CUDA=OFF >&2
cmake --build "$dest/build" -j "${KVC_LLAMA_CPP_JOBS:-2}" --target "${tools[@]}" >&2
have_all || { echo "error: llama.cpp build finished without ${tools[*]} in $bin" >&2; exit 1; }
echo "$bin"
