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
# The instruction sets of this machine spelled out rather than GGML_NATIVE: native would also enable AMX,
# whose tiles a virtual machine may not grant (the AMX kernels then die of SIGILL).
cmake -S "$src" -B "$dest/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
  -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX_VNNI=ON \
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DGGML_CUDA=OFF >&2
cmake --build "$dest/build" -j "${KVC_LLAMA_CPP_JOBS:-2}" --target "${tools[@]}" >&2
have_all || { echo "error: llama.cpp build finished without ${tools[*]} in $bin" >&2; exit 1; }
echo "$bin"
