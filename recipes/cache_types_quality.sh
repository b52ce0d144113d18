#!/usr/bin/env bash
# Typed KV caches on the real model (Gemma 3 270M, Q4_K_M GGUF): KL divergence of the next-token
# distributions against the fp32 cache on WikiText-2, and the bytes each cache holds after the prefill,
# alone and combined with eviction and with the low-rank cache (bases calibrated here on other text).
# Writes data/results/gemma3/cache_types.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
GGUF=$(scripts/model_path.sh gemma3-270m)
TEXT=data/text/wikitext2/wiki.test.raw
WINDOWS=${KVC_WINDOWS:-4}
CTX=1024
OUT=data/results/gemma3
CALIBRATION_TOKENS=8192
if [ -n "${KVC_SMOKE:-}" ]; then WINDOWS=1; CTX=128; CALIBRATION_TOKENS=256; OUT=$(mktemp -d); fi
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The smoke run's one short window needs only the text's first 20 KB.
if [ -n "${KVC_SMOKE:-}" ]; then head -c 20000 "$TEXT" > "$work/text.txt"; TEXT=$work/text.txt; fi
"$BIN/kvc-calibrate" -m "$GGUF" --dtype float32 -f data/text/pg_essays/*.txt --tokens "$CALIBRATION_TOKENS" -c "$CTX" \
  -o "$work/bases.safetensors" --json > /dev/null
LOWRANK="--lowrank $work/bases.safetensors --rank 128"  # half of d_kv = 256

# "types|press flags": the reference of every row is the fp32 dense cache.
configs=("f16|" "bf16|" "q8_0|" "q4_0|" "f32|--press snapkv --ratio 0.5" "f16|--press snapkv --ratio 0.5"
         "bf16|--press snapkv --ratio 0.5" "q8_0|--press snapkv --ratio 0.5" "q4_0|--press snapkv --ratio 0.5"
         "f16|--press tova --ratio 0.5" "q8_0|--press tova --ratio 0.5" "f16|--press d2o --ratio 0.5"
         "q8_0|--press d2o:merge=0 --ratio 0.5" "f32|$LOWRANK" "f16|$LOWRANK" "bf16|$LOWRANK"
         "f16|$LOWRANK --press snapkv:heads=shared --ratio 0.5")
i=0
for config in "${configs[@]}"; do
  type=${config%%|*}
  press=${config#*|}
  # shellcheck disable=SC2086
  "$BIN/kvc-eval" kl -m "$GGUF" --dtype float32 -f "$TEXT" -c $CTX --max-windows "$WINDOWS" --chunk 32 -ctk "$type" -ctv "$type" \
    $press --json > "$work/$i.json"
  echo "$type|${press//$work\//}" > "$work/$i.name"
  i=$((i + 1))
done

python3 - "$work" "$OUT" "$i" "$CTX" "$WINDOWS" <<'PY'
import json, pathlib, sys
work, out, n, ctx, windows = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = []
lines = [f"Gemma 3 270M, WikiText-2, {windows} windows of {ctx} (first half prefilled, second half decoded 32 at a time); "
         "reference: the fp32 dense cache.", "",
         "| cache type | press | global-layer KV bytes vs fp32 | mean KL | max KL | top-1 agreement | ppl (fp32 cache) |",
         "|---|---|---|---|---|---|---|"]
for i in range(n):
    r = json.loads((work / f"{i}.json").read_text())
    t, press = (work / f"{i}.name").read_text().strip().split("|")
    ref, cmp_ = r["reference_kv_bytes"] - r["reference_window_kv_bytes"], r["compressed_kv_bytes"] - r["compressed_window_kv_bytes"]
    row = {"cache_type": t, "press": press or "none", "global_bytes_ratio": cmp_ / ref,
           "all_bytes_ratio": r["compressed_kv_bytes"] / r["reference_kv_bytes"], "mean_kl": r["kl"],
           "max_kl": r["max_kl"], "top1_agreement": r["top1_agreement"], "ppl": r["ppl_compressed"],
           "ppl_reference": r["ppl_reference"], "tokens_scored": r["tokens_scored"]}
    rows.append(row)
    lines.append(f"| {t} | {row['press']} | {row['global_bytes_ratio']:.3f} | {row['mean_kl']:.2e} | {row['max_kl']:.2e} "
                 f"| {row['top1_agreement']:.4f} | {row['ppl']:.4f} (fp32 {row['ppl_reference']:.4f}) |")
(out / "cache_types.json").write_text(json.dumps({"ctx": ctx, "windows": windows, "rows": rows}, indent=1) + "\n")
(out / "cache_types.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
