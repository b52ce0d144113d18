#!/usr/bin/env bash
# Builds every test with AddressSanitizer + UBSan (build-asan) and runs the whole ctest suite under them.
# Usage: scripts/sanitize.sh [build-dir] [extra ctest arguments...]
#   KVC_JOBS=N      build/test parallelism (default 2)
#   KVC_SAN_BUILD_ONLY=1  configure and build, do not run
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build-asan}"
shift || true
JOBS="${KVC_JOBS:-2}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVC_ASAN=ON
cmake --build "$BUILD_DIR" -j"$JOBS"
[[ "${KVC_SAN_BUILD_ONLY:-0}" == 1 ]] && exit 0
# Leaks: LibTorch's and protobuf's static allocations outlive main, so leak checking is narrowed by a
# suppressions file rather than switched off. halt_on_error makes the first report fail the test.
# UBSan reports become failures too (print_stacktrace for the culprit).
# Reports also go to files (log_path), one per process: a tool that a test runs and expects to fail
# would otherwise hide a report behind its expected non-zero exit.
SUPP="$PWD/tests/sanitize/lsan.supp"
REPORTS="$PWD/$BUILD_DIR/sanitizer-reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=0:log_path=$REPORTS/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$SUPP:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$REPORTS/ubsan${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" "$@" || status=$?
if [[ -n "$(ls -A "$REPORTS")" ]]; then
  echo "sanitize: $(ls "$REPORTS" | wc -l) sanitizer report file(s) in $REPORTS:" >&2
  head -n 40 "$REPORTS"/* >&2
  exit 1
fi
echo "sanitize: no sanitizer reports"
exit "$status"
