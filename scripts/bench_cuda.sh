#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and PyTorch: builds kvc against that PyTorch (scripts/build_torch2.sh),
# runs the CUDA-vs-CPU tests, measures bf16 prefill/decode with kvc-bench (134M model and the 1-layer
# 7B-shaped checkpoint, 2K-32K), compressed decoding at 32K with kvc-generate, and the cache on storage
# (--retrieval) with the model on the GPU against the CPU at 32K, then runs the whole
# test suite with the GPU visible. Usage: scripts/bench_cuda.sh [build|bench|gen|retrieval|ctest|all]...
# Raw outputs go to KVC_CUDA_OUT (default data/results/cuda). Dependencies missing there (no network)
# can travel as Debian packages in .deps/debs and jieba's dictionary in .deps/jieba (README, "LibTorch 2.x
# (PyPI) and CUDA").
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS="${*:-all}"
OUTDIR="${KVC_CUDA_OUT:-data/results/cuda}"
BUILD="${KVC_CUDA_BUILD:-build-cuda}"
JOBS="${KVC_JOBS:-$(nproc)}"
CTX="${KVC_CUDA_CONTEXTS:-2048,4096,8192,16384,32768}"
mkdir -p "$OUTDIR"
want() { [[ " $STEPS " == *" $1 "* || " $STEPS " == *" all "* ]]; }

if [ -d .deps/debs ]; then
  P=/tmp/kvc-deps
  mkdir -p "$P"
  for f in .deps/debs/*.deb; do dpkg -x "$f" "$P"; done
  L="$P/usr/lib/x86_64-linux-gnu"
  export LD_LIBRARY_PATH="$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PATH="$PATH:$P/usr/bin"
  export PKG_CONFIG_LIBDIR="$L/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$P" KVC_PREFIX_PATH="$P/usr"
  command -v pkg-config >/dev/null || export PKG_CONFIG="$P/usr/bin/pkgconf"
fi

# CMake takes $CXX or the first c++ on PATH. One that has only a static libstdc++ is refused with PyPI's
# LibTorch (CMakeLists.txt says why): the system's g++ is taken instead where it has a shared one.
cxx="${CXX:-$(command -v c++ || command -v g++ || true)}"
if [ -n "$cxx" ] && [ ! -f "$("$cxx" -print-file-name=libstdc++.so)" ] && [ -x /usr/bin/g++ ] &&
   [ -f "$(/usr/bin/g++ -print-file-name=libstdc++.so)" ]; then
  export CXX=/usr/bin/g++
fi

# jieba's dictionary for the LongBench Chinese tests, where python3-jieba is not installed: a copy of its
# dict.txt and finalseg/ in .deps/jieba.
[ -d .deps/jieba ] && export KVC_JIEBA_DIR="$PWD/.deps/jieba"

if want build || [ ! -f "$BUILD/CMakeCache.txt" ]; then
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    nvcc --version | tail -1
  } > "$OUTDIR/gpu.txt" 2>&1
  # -k: a file that fails to compile leaves the others (and the tools) built.
  KVC_PYTHON=python3 KVC_JOBS="$JOBS" KVC_BUILD_ONLY=1 KVC_BUILD_ARGS="-k" bash scripts/build_torch2.sh "$BUILD" \
    > "$OUTDIR/build.txt" 2>&1
  echo "build exit $?"
  grep -E 'error|built in' "$OUTDIR/build.txt" | head -20
  "$BUILD/bin/test_cuda" > "$OUTDIR/test_cuda.txt" 2>&1
  echo "test_cuda exit $?"
  "$BUILD/bin/test_kernels" --gtest_filter='KernelBuild.*' >> "$OUTDIR/test_cuda.txt" 2>&1
  grep -E '^\[  (FAILED|PASSED|SKIPPED) |OK \]|Failure|error' "$OUTDIR/test_cuda.txt" | head -30
fi

if want bench; then
  B="$BUILD/bin"
  TOK=data/models/stories260K/tokenizer.model  # 512 pieces: any id is valid in the 32000-token vocabularies
  # Room for the 32K prompt plus the decode steps.
  "$B/kvc-make-checkpoint" --preset llama-125m --context 36864 --dtype bfloat16 --tokenizer "$TOK" -o /tmp/kvc-125m > /dev/null
  "$B/kvc-make-checkpoint" --preset llama2-7b-1layer --context 36864 --dtype bfloat16 --tokenizer "$TOK" -o /tmp/kvc-7b1 > /dev/null
  for m in 125m 7b1; do
    "$B/kvc-bench" -m /tmp/kvc-$m --device cuda --dtype bfloat16 --contexts "$CTX" --decode-tokens 64 \
      --json-out "$OUTDIR/bench_$m.json" > "$OUTDIR/bench_$m.txt" 2>&1
    cat "$OUTDIR/bench_$m.txt"
  done
fi

# The generation steps' inputs: a random-weight checkpoint of PRESET with the tokenizer's 512-token
# vocabulary (generated ids must decode) at PATH, and a prompt of more than 32K tokens.
checkpoint_v512() {
  "$BUILD/bin/kvc-make-checkpoint" --preset "$1" --vocab 512 --context 36864 --dtype bfloat16 \
    --tokenizer data/models/stories260K/tokenizer.model -o "$2" > /dev/null
}
write_prompt() { cat data/text/pg_essays/*.txt data/text/pg_essays/*.txt > /tmp/kvc-prompt.txt; }

if want gen; then
  B="$BUILD/bin"
  write_prompt
  # Compressed decoding at 32K: 256 greedy steps after a 32768-token prompt, on the 134M and the 1-layer
  # 7B shapes with the tokenizer's 512-token vocabulary (generated ids must decode); low-rank bases from
  # kvc-calibrate on the same text, at a quarter and an eighth of d_kv, with pre-RoPE and rotated keys.
  for m in ${KVC_CUDA_GEN_MODELS:-125m 7b1}; do
    preset=llama-125m dkv=768
    [ "$m" = 7b1 ] && preset=llama2-7b-1layer dkv=4096
    M=/tmp/kvc-$m-v512
    checkpoint_v512 $preset $M
    "$B/kvc-calibrate" -m $M --device cuda --dtype bfloat16 -f data/text/pg_essays/*.txt --tokens 32768 \
      -o /tmp/kvc-bases-$m.safetensors --json > "$OUTDIR/calibrate_$m.json" 2> "$OUTDIR/calibrate_$m.log"
    echo "calibrate $m exit $?"
    gen() {
      local name=$1
      shift
      "$B/kvc-generate" -m $M --device cuda --dtype bfloat16 -f /tmp/kvc-prompt.txt --prompt-tokens 32768 -n 256 \
        --ignore-eos -q --json-out /tmp/kvc-gen.json "$@" 2> "$OUTDIR/gen32k_${m}_$name.log"
      echo "$m $name exit $?: $(tail -2 "$OUTDIR/gen32k_${m}_$name.log" | tr '\n' ' ')"
      python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("prompt_ids",None); json.dump(d,open(sys.argv[2],"w"),indent=1)' \
        /tmp/kvc-gen.json "$OUTDIR/gen32k_${m}_$name.json"
    }
    gen none
    gen snapkv --press snapkv --ratio 0.9
    gen streaming_llm --press streaming_llm --ratio 0.9
    gen lowrank_r$((dkv / 4)) --lowrank /tmp/kvc-bases-$m.safetensors --rank $((dkv / 4))
    gen lowrank_r$((dkv / 8)) --lowrank /tmp/kvc-bases-$m.safetensors --rank $((dkv / 8))
    gen lowrank_rotated_r$((dkv / 4)) --lowrank /tmp/kvc-bases-$m.safetensors:keys=rotated --rank $((dkv / 4))
    gen lowrank_rotated_r$((dkv / 8)) --lowrank /tmp/kvc-bases-$m.safetensors:keys=rotated --rank $((dkv / 8))
  done
fi

if want retrieval; then
  B="$BUILD/bin"
  M=/tmp/kvc-7b1-v512
  [ -f $M/config.json ] || checkpoint_v512 llama2-7b-1layer $M
  write_prompt
  # The cache on storage with the model on the GPU against the full cache in GPU memory, and both on the
  # CPU (every core), on the 1-layer 7B shape at 32K: the stats lines of kvc-generate.
  for dev in cuda cpu; do
    n=128
    [ $dev = cpu ] && n=64
    for r in none adaptive; do
      args=()
      [ $r != none ] && args=(--retrieval $r --retrieval-store /tmp/kvc-retrieval-$dev.kvs)
      name=gen32k_7b1_${dev}_$([ $r = none ] && echo none || echo retrieval_$r)
      "$B/kvc-generate" -m $M --device $dev --dtype bfloat16 -f /tmp/kvc-prompt.txt --prompt-tokens 32768 -n $n \
        --ignore-eos -q "${args[@]}" 2> "$OUTDIR/$name.log"
      echo "$name exit $?: $(tail -2 "$OUTDIR/$name.log" | tr '\n' ' ')"
    done
  done
fi

if want ctest; then
  ctest --test-dir "$BUILD" -j"$JOBS" --timeout "${KVC_TEST_TIMEOUT:-300}" --output-on-failure > "$OUTDIR/ctest.txt" 2>&1
  echo "ctest exit $?"
  grep -E 'tests passed|Total Test time|\(Failed\)|\(Timeout\)|Not Run' "$OUTDIR/ctest.txt" | tail -30
fi
