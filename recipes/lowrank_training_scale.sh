#!/usr/bin/env bash
# Gate training, how long and how fast:
#   1. held-out curves: kvc-train on stories260K (TinyStories) and kvc-tiny-lm (the essays), with the
#      paper's cross-entropy loss and with --loss kl, alpha 4, evaluated every 100 steps on the last
#      20% of the text (never trained on): held-out CE, KL from the exact model and the kept share.
#      Shows whether the 300 steps of recipes/lowrank_matched_memory.sh are enough.
#   2. throughput at a real size: kvc-train tokens/s on the 134M Llama (random weights; the cost does
#      not depend on them) at 512-token windows, and what that rate means for 1B and 8B models and for
#      the paper's 128M training tokens on this machine (compute grows with the parameter count).
# Writes data/results/lowrank/training_scale.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
OUT=data/results/lowrank
STEPS=1500
EVERY=100
BIG_STEPS=3
BIG_CTX=512
THREADS=${KVC_THREADS:-2}
if [ -n "${KVC_SMOKE:-}" ]; then STEPS=4; EVERY=2; BIG_STEPS=1; BIG_CTX=64; OUT=$(mktemp -d); fi
# Measured on kvc-tiny-lm (2.4M parameters, from ../shared: scripts/model_path.sh); the smoke run uses the
# repository's kvc-micro-lm.
. recipes/lib/needle_model.sh
TINY=$(needle_model)
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat data/text/pg_essays/*.txt > "$work/essays.txt"
cp data/text/tinystories/tinystories_excerpt_30k.txt "$work/stories.txt"
for entry in "stories260K|stories|data/models/stories260K" "kvc-tiny-lm|essays|$TINY"; do
  IFS='|' read -r model text path <<< "$entry"
  "$BIN/kvc-calibrate" -m "$path" -t 1 -f "$work/$text.txt" --tokens 100000 -c 256 \
    -o "$work/$model.bases.safetensors" > /dev/null
  for loss in ce kl; do
    "$BIN/kvc-train" -m "$path" -t 1 --bases "$work/$model.bases.safetensors" -f "$work/$text.txt" \
      --heldout 0.2 --loss $loss --alpha 4 --steps "$STEPS" -c 128 --batch 8 --lr 0.02 --eval-every "$EVERY" \
      --eval-windows 8 -o "$work/$model.$loss.safetensors" --json > "$work/curve.$model.$loss.json"
  done
done

# The 134M model: random weights of the llama-125m preset (the smoke run: a small model of the same kind),
# with stories260K's tokenizer (its ids are a subset of the 32000 rows; every logit is still computed).
tok=(--tokenizer data/models/stories260K/tokenizer.model)
if [ -n "${KVC_SMOKE:-}" ]; then
  "$BIN/kvc-make-checkpoint" --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 512 --context 1024 \
    "${tok[@]}" --out-dir "$work/big" > /dev/null
else
  "$BIN/kvc-make-checkpoint" --preset llama-125m --context 2048 "${tok[@]}" --out-dir "$work/big" > /dev/null
fi
"$BIN/kvc-calibrate" -m "$work/big" -t "$THREADS" -f "$work/stories.txt" --tokens 4000 -c "$BIG_CTX" \
  -o "$work/big.bases.safetensors" > /dev/null
"$BIN/kvc-train" -m "$work/big" -t "$THREADS" --bases "$work/big.bases.safetensors" -f "$work/stories.txt" \
  --steps "$BIG_STEPS" -c "$BIG_CTX" --batch 2 --eval-every 0 -o "$work/big.gates.safetensors" --json \
  > "$work/big.json"

python3 - "$work" "$OUT" "$THREADS" "$BIG_CTX" <<'PY'
import json, pathlib, struct, sys
work, out, threads, big_ctx = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def parameters(folder):
    raw = (folder / "model.safetensors").read_bytes()[:8]
    header = json.loads((folder / "model.safetensors").open("rb").read(8 + struct.unpack("<Q", raw)[0])[8:])
    total = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        n = 1
        for d in info["shape"]:
            n *= d
        total += n
    return total

curves = {}
for model in ("stories260K", "kvc-tiny-lm"):
    for loss in ("ce", "kl"):
        curves[f"{model}/{loss}"] = json.loads((work / f"curve.{model}.{loss}.json").read_text())["evals"]
big = json.loads((work / "big.json").read_text())
n_big = parameters(work / "big")
rate = big["evals"][-1]["tokens_per_second"]
paper_tokens = 128e6
projection = [{"parameters": n, "tokens_per_second": rate * n_big / n,
               "days_for_128M_tokens": paper_tokens / (rate * n_big / n) / 86400} for n in (n_big, 1e9, 8e9)]
result = {"curves": curves, "throughput": {"parameters": n_big, "window": big_ctx, "threads": threads,
                                           "tokens_per_second": rate, "projection": projection}}
(out / "training_scale.json").write_text(json.dumps(result, indent=1) + "\n")

lines = ["Held-out curves of kvc-train (alpha 4, 8 windows of 128 tokens a step, lr 0.02, one thread; "
         "evaluated on the last 20% of the text, never trained on). Each cell: held-out CE / KL from the exact "
         "model / kept share (hard gates).", ""]
for model in ("stories260K", "kvc-tiny-lm"):
    ce, kl = curves[f"{model}/ce"], curves[f"{model}/kl"]
    lines += [f"**{model}** (exact-cache CE {ce[-1]['heldout_ce_exact_cache']:.3f}; training "
              f"{ce[-1]['tokens_per_second']:.0f} / {kl[-1]['tokens_per_second']:.0f} tok/s with ce / kl)", "",
              "| step | --loss ce | --loss kl |", "|---|---|---|"]
    for a, b in zip(ce, kl):
        cell = lambda e: f"{e['heldout_ce']:.3f} / {e['heldout_kl']:.3f} / {e['retain_hard']:.3f}"
        lines.append(f"| {a['step']} | {cell(a)} | {cell(b)} |")
    lines.append("")
lines += [f"Throughput: kvc-train on a {n_big / 1e6:.0f}M-parameter Llama (random weights), windows of {big_ctx} "
          f"tokens, batch 2, {threads} threads: **{rate:.0f} tok/s**. Gate training runs the frozen model forward "
          "and back (activations only), so its cost per token grows with the parameter count; at this machine's "
          "rate:", "",
          "| model | tok/s (measured, then scaled by parameters) | days for the paper's 128M tokens |", "|---|---|---|"]
for p in projection:
    lines.append(f"| {p['parameters'] / 1e9:.2f}B | {p['tokens_per_second']:.1f} | {p['days_for_128M_tokens']:.1f} |")
(out / "training_scale.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
