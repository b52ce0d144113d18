#!/usr/bin/env bash
# What keys in a rotated basis (--lowrank ...:keys=rotated) cost in quality: KL and perplexity against
# the exact model of a fixed rank for keys and values (round(share * d_kv)) with keys stored before RoPE
# (the paper's form) and after it, on stories260K (bases from the TinyStories excerpt, evaluated on
# WikiText-2, 8 windows of 256) and Gemma 3 270M (bases from the first 80% of the essays, evaluated on
# the last 20%, 4 windows of 512; only its 3 global layers are low-rank). Writes
# data/results/lowrank/rotated_keys_quality.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
OUT=data/results/lowrank
GGUF=$(scripts/model_path.sh gemma3-270m)
SHARES="0.5 0.3 0.2"
GEMMA_TOKENS=50000 GEMMA_WINDOWS=4 GEMMA_CTX=512 STORIES_WINDOWS=8 CHUNK=1
# KVC_SMOKE=1 (the README test suite): one short window each, the scored half fed 32 tokens a pass (a
# low-rank cache compresses each entry as it is appended, so this scores the same entries in fewer
# passes through Gemma's 262K-entry output layer).
if [ -n "${KVC_SMOKE:-}" ]; then
  SHARES=0.5 GEMMA_TOKENS=2000 GEMMA_WINDOWS=1 GEMMA_CTX=128 STORIES_WINDOWS=1 CHUNK=32 OUT=$(mktemp -d)
fi
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

. recipes/lib/essay_split.sh
split_essays "$work/train.txt" "$work/eval.txt" ${KVC_SMOKE:+80000}
"$BIN/kvc-calibrate" -m data/models/stories260K -t 1 -f data/text/tinystories/tinystories_excerpt_30k.txt \
  --tokens 20000 -o "$work/stories260K.safetensors" --json > "$work/stories260K.json"
"$BIN/kvc-calibrate" -m "$GGUF" --dtype float32 -t 1 -f "$work/train.txt" --tokens "$GEMMA_TOKENS" -c 512 \
  -o "$work/gemma3.safetensors" --json > "$work/gemma3.json"

python3 - "$BIN" "$GGUF" "$work" "$OUT" "$STORIES_WINDOWS" "$GEMMA_WINDOWS" "$GEMMA_CTX" "$CHUNK" $SHARES <<'PY'
import json, pathlib, subprocess, sys
BIN, gguf, work, out = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4])
stories_windows, gemma_windows, gemma_ctx, chunk = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), sys.argv[8]
shares = [float(x) for x in sys.argv[9:]]
models = {
    "stories260K": ("data/models/stories260K", "data/text/wikitext2/wiki.test.raw", 256, stories_windows),
    "gemma3-270m": (gguf, str(work / "eval.txt"), gemma_ctx, gemma_windows),
}
rows = []
for name, (model, text, ctx, windows) in models.items():
    bases = work / f"{'stories260K' if name == 'stories260K' else 'gemma3'}.safetensors"
    dkv = json.loads((work / f"{bases.stem}.json").read_text())["kv_dim"]
    for share in shares:
        rank = max(1, round(share * dkv))
        for keys in ("pre-rope", "rotated"):
            cmd = [f"{BIN}/kvc-eval", "kl", "-m", model, *(["--dtype", "float32"] if model.endswith(".gguf") else []), "-t", "1", "-f", text, "-c", str(ctx), "--max-windows",
                   str(windows), "--lowrank", f"{bases}:keys={keys}", "--rank", str(rank), "--chunk", chunk, "--json"]
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            rows.append({"model": name, "share": share, "rank": rank, "keys": keys, "kl": r["kl"],
                         "ppl": r["ppl_compressed"], "ppl_exact": r["ppl_reference"],
                         "top1_agreement": r["top1_agreement"]})
(out / "rotated_keys_quality.json").write_text(json.dumps({"rows": rows}, indent=1) + "\n")
lines = ["KL / perplexity against the exact model at a fixed rank for keys and values, keys stored before RoPE "
         "(pre-rope, the default) or after it (rotated). stories260K: bases from the TinyStories excerpt, "
         f"WikiText-2, {stories_windows} windows of 256. Gemma 3 270M: bases from the first 80% of the essays, the "
         f"last 20%, {gemma_windows} windows of {gemma_ctx} (the 3 global layers are low-rank).", "",
         "| model | share (rank) | pre-rope | rotated |", "|---|---|---|---|"]
for name in models:
    for share in shares:
        sel = {r["keys"]: r for r in rows if r["model"] == name and r["share"] == share}
        cell = lambda k: f"{sel[k]['kl']:.3f} / {sel[k]['ppl']:.2f}"
        lines.append(f"| {name} (exact ppl {sel['pre-rope']['ppl_exact']:.2f}) | {share} ({sel['pre-rope']['rank']}) "
                     f"| {cell('pre-rope')} | {cell('rotated')} |")
(out / "rotated_keys_quality.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
