#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, KVC_FUZZ=ON, build-fuzz) and runs each on a working copy of its
# committed seed corpus (tests/fuzz/corpus/<target>, made by tests/fuzz/make_corpus.py), then prints target -> executions -> crashes -> corpus.
#
#   scripts/fuzz.sh                    short run: 60 s per target, one after another
#   KVC_FUZZ_SECONDS=1200 KVC_FUZZ_PARALLEL=2 scripts/fuzz.sh    the longer run (data/results/hardening/fuzz.md)
#   scripts/fuzz.sh safetensors gguf   only these targets
# Other knobs: KVC_FUZZ_BUILD (build folder), KVC_FUZZ_TABLE (also write the table there), KVC_JOBS.
# A crash stops that target's run; its input is left in <build>/crashes/<target>/ for a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${KVC_FUZZ_BUILD:-build-fuzz}"
SECONDS_PER_TARGET="${KVC_FUZZ_SECONDS:-60}"
PARALLEL="${KVC_FUZZ_PARALLEL:-1}"
ALL=(safetensors model_config gguf gguf_tokenizer tokenizer_json sentencepiece_model cluster_index store_pages checkpoint
     chat_template)
TARGETS=("${@:-${ALL[@]}}")

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVC_FUZZ=ON \
      -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang >/dev/null
cmake --build "$BUILD" --target kvc_fuzz -j"${KVC_JOBS:-2}"

run_one() {
  local t="$1" work="$BUILD/corpus/$1" crashes="$BUILD/crashes/$1"
  mkdir -p "$work" "$crashes"
  # Seeds, plus every input that once crashed a reader (its regression test lives with the reader's tests).
  cp -n tests/fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  cp -n tests/fuzz/regressions/"$t"/* "$work"/ 2>/dev/null || true
  # -timeout: an input that takes this long is a hang; -rss_limit_mb: a runaway allocation is a finding.
  "$BUILD/bin/fuzz_$t" "$work" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$crashes/" >"$BUILD/fuzz_$t.log" 2>&1 || true
}

running=0
for t in "${TARGETS[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if (( running >= PARALLEL )); then wait -n; running=$((running - 1)); fi
done
wait

table="| target | executions | crashes | corpus (files) |
|---|---:|---:|---:|"
total=0
for t in "${TARGETS[@]}"; do
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$BUILD/fuzz_$t.log" | grep -o '[0-9]*$' || echo 0)
  crashes=$(find "$BUILD/crashes/$t" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  corpus=$(find "$BUILD/corpus/$t" -type f | wc -l)
  total=$((total + ${execs:-0}))
  table+="
| $t | ${execs:-0} | $crashes | $corpus |"
done
table+="
| **total** | $total | | |"
echo "$table"
[[ -n "${KVC_FUZZ_TABLE:-}" ]] && echo "$table" >"$KVC_FUZZ_TABLE"
exit 0
