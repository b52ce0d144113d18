#!/usr/bin/env bash
# The main job on the bundled model: build if needed, generate with stats, then measure perplexity.
# Usage: recipes/quickstart.sh [model-dir]   (default data/models/stories260K)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-data/models/stories260K}"
BIN=build/bin
if [ ! -x "$BIN/kvc-generate" ] || [ ! -x "$BIN/kvc-eval" ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"${KVC_JOBS:-2}" --target kvc-generate kvc-eval
fi
echo "== kvc-generate (greedy, 60 tokens)"
"$BIN/kvc-generate" -m "$MODEL" -p "Once upon a time, there was a little dog" -n 60 --stats-json /tmp/kvc-quickstart-stats.json
python3 - <<'PY' 2>/dev/null || cat /tmp/kvc-quickstart-stats.json
import json
s = json.load(open("/tmp/kvc-quickstart-stats.json"))
print(f"prefill {s['prefill_tokens_per_second']:.0f} tok/s, decode {s['decode_tokens_per_second']:.0f} tok/s, "
      f"KV cache {s['kv_resident_bytes']} bytes resident, peak RSS {s['peak_rss_bytes'] / 2**20:.0f} MiB")
PY
echo "== kvc-eval ppl (reference protocol, WikiText-2 test, 40 windows of 256)"
"$BIN/kvc-eval" ppl -m "$MODEL" --file data/text/wikitext2/wiki.test.raw --window 256 --max-windows 40
