#!/usr/bin/env bash
# How DynamicKV (Alg. 1, the official code's defaults) spreads the kept entries over SmolLM2-135M-Instruct's
# 30 layers, against SnapKV's uniform budget: one essay prompt in the chat template's turn markers
# (<|im_start|>user ... <|im_end|> <|im_start|>assistant, which the tokenizer reads as its special tokens),
# each press at RATIOS, the positions every layer x KV head kept written by --dump-kept and counted.
# Then the ablation that isolates the layer budgets: RULER niah_single_2 at 4,096 tokens through --chat,
# SAMPLES samples, DynamicKV against SnapKV scored exactly as DynamicKV scores (window 8, kernel 7, zero
# padding, context pooling: every layer the same budget) and DynamicKV with rmax=1 (each layer capped at
# the uniform budget, which must give SnapKV's answers back).
# Writes OUT/dynamickv_layers_smollm2.md: entries kept per layer (mean over KV heads) for each press and
# ratio, and the ablation's table.
#   recipes/dynamickv_layers_smollm2.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
RATIOS="${RATIOS:-0.25 0.5}"
PRESSES="dynamickv snapkv"
OUT="${OUT:-data/results/eviction}"
MODEL=""
BYTES=14000
SAMPLES="${SAMPLES:-5}"
RULER_LENGTH=4096
chat=(--chat)
# KVC_SMOKE=1 (the documentation's tests): the repository's model, short prompts, one sample.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; BYTES=1500; RATIOS=0.5; OUT=$(mktemp -d); SAMPLES=1; RULER_LENGTH=256; chat=()
fi
[ -n "$MODEL" ] || MODEL=$(scripts/model_path.sh smollm2-135m)
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  printf '<|im_start|>user\n'
  head -c "$BYTES" data/text/pg_essays/addiction.txt
  printf '\n\nWhat is the main point of the text above?<|im_end|>\n<|im_start|>assistant\n'
} > "$work/prompt.txt"
for ratio in $RATIOS; do
  for press in $PRESSES; do
    "$BIN/kvc-generate" -m "$MODEL" -f "$work/prompt.txt" -n 1 -t 1 -q --press "$press" --ratio "$ratio" \
      --dump-kept "$work/kept.$press.$ratio.safetensors" > /dev/null 2>&1
  done
done
python3 - "$work" "$OUT/dynamickv_layers_smollm2.md" "$RATIOS" $PRESSES <<'EOF'
import json, pathlib, struct, sys
work, out, ratios, presses = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(), sys.argv[4:]

def kept_per_layer(path):  # mean over KV heads of the entries each layer kept, and the metadata
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    per = {}
    for name, info in header.items():
        if name.startswith("final."):
            _, layer, head = name.split(".")
            per.setdefault(int(layer), []).append(info["shape"][0])
    return [sum(v) / len(v) for _, v in sorted(per.items())], header["__metadata__"]

runs = {(p, r): kept_per_layer(work / f"kept.{p}.{r}.safetensors") for p in presses for r in ratios}
meta = next(iter(runs.values()))[1]
prompt = int(meta["prompt_tokens"])
lines = [f"Entries kept per layer (mean over the {meta['num_kv_heads']} KV heads) of a {prompt}-token prompt; "
         "`--press P --ratio R`, positions from `--dump-kept`.", "",
         "| layer | " + " | ".join(f"{p} @ {r}" for r in ratios for p in presses) + " |",
         "|---|" + "---|" * (len(ratios) * len(presses))]
layers = len(next(iter(runs.values()))[0])
for layer in range(layers):
    lines.append(f"| {layer} | " + " | ".join(f"{runs[(p, r)][0][layer]:.0f}" for r in ratios for p in presses) + " |")
for r in ratios:
    for p in presses:
        kept = runs[(p, r)][0]
        lines.append("")
        lines.append(f"{p} @ {r}: fewest kept {min(kept):.0f} ({min(kept) / prompt:.0%} of the prompt, layer "
                     f"{kept.index(min(kept))}), most {max(kept):.0f}; layers keeping under half the prompt: "
                     f"{sum(k < prompt / 2 for k in kept)} of {layers}.")
pathlib.Path(out).write_text("\n".join(lines) + "\n")
EOF
"$BIN/kvc-eval" sweep -m "$MODEL" "${chat[@]}" --tasks niah_single_2 --task-lengths "$RULER_LENGTH" --samples "$SAMPLES" \
  --ruler-new-tokens 24 --ratios "${RATIOS// /,}" --query aware --seed 0 -t 1 --out-dir "$work/sweep" \
  --methods "none,snapkv:window=8,kernel=7,pad=zeros,pool=context,dynamickv,dynamickv:rmax=1" > /dev/null 2>&1
{
  echo
  echo "RULER niah_single_2 at $RULER_LENGTH tokens, $SAMPLES samples per cell, question-aware (kvc-eval sweep):"
  echo
  python3 - "$work/sweep/results.md" <<'EOF'
import sys
text = open(sys.argv[1]).read().split("\n")
start = next(i for i, line in enumerate(text) if line.startswith("| method"))
end = next((i for i in range(start, len(text)) if not text[i].startswith("|")), len(text))
print("\n".join(text[start:end]))
EOF
} >> "$OUT/dynamickv_layers_smollm2.md"
cat "$OUT/dynamickv_layers_smollm2.md"
