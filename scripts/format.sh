#!/usr/bin/env bash
# Formats every C++ file the repository tracks with .clang-format (clang-format 14: apt-get install clang-format).
# Skipped: generated files (their generator owns the layout) and examples/add_a_method, whose text the docs quote.
#   bash scripts/format.sh          rewrite the files in place
#   bash scripts/format.sh --check  list the files that differ from the style; exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format.sh: clang-format not found (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' \
  | grep -v -e '^examples/add_a_method/' -e '^lib/metrics/python_unicode_tables.cpp$')
if [[ "${1:-}" == "--check" ]]; then
  differ=0
  for f in "${files[@]}"; do
    if ! clang-format "$f" | cmp -s - "$f"; then echo "$f"; differ=1; fi
  done
  exit "$differ"
fi
clang-format -i "${files[@]}"
