#!/usr/bin/env bash
# Palu's grouped low rank at the kept shares of recipes/lowrank_matched_memory.sh (0.5 / 0.3 / 0.2 of the
# cache), on the same models and texts (stories260K: TinyStories, first 25,000 bytes to calibrate, the rest
# held out, WikiText-2 as the other domain; kvc-tiny-lm: the essays split 4/5 : 1/5, WikiText-2), KL and
# perplexity against the exact model over 8 windows of 256 tokens:
#   palu-weights   --lowrank palu --rank R: one basis for all KV heads of a layer (J-LRD) from the SVD of
#                  its K/V projection weights, R = share × KV heads × head_dim
#   palu-calibrated --lowrank bases:group=KV --rank R: the same joint basis from the calibration's second moment
#   palu-per-head  --lowrank palu:group=1 --rank R: one basis per KV head from the weights (M-LRD)
# Writes data/results/lowrank/palu_matched_memory.csv (about 3 minutes here).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
OUT="${OUT:-data/results/lowrank}"
WINDOWS=8
SHARES="0.5 0.3 0.2"
if [ -n "${KVC_SMOKE:-}" ]; then WINDOWS=1; SHARES=0.3; OUT=$(mktemp -d); fi
. recipes/lib/needle_model.sh
TINY=$(needle_model)
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 25000 data/text/tinystories/tinystories_excerpt_30k.txt > "$work/stories_train.txt"
tail -c +25001 data/text/tinystories/tinystories_excerpt_30k.txt > "$work/stories_eval.txt"
. recipes/lib/essay_split.sh
split_essays "$work/essays_train.txt" "$work/essays_eval.txt"
for entry in "stories260K|stories|data/models/stories260K" "kvc-tiny-lm|essays|$TINY"; do
  IFS='|' read -r model text path <<< "$entry"
  "$BIN/kvc-calibrate" -m "$path" -t 1 -f "$work/${text}_train.txt" --tokens 100000 -c 256 \
    -o "$work/$model.bases.safetensors" --json > "$work/$model.calibrate.json"
done
python3 - "$BIN" "$work" "$OUT" "$WINDOWS" "$TINY" "$SHARES" <<'PY'
import csv, json, os, pathlib, subprocess, sys
BIN, work, out, windows, tiny, shares = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
models = {"stories260K": ("data/models/stories260K", work / "stories_eval.txt"), "kvc-tiny-lm": (tiny, work / "essays_eval.txt")}
rows = []
for model, (path, indomain) in models.items():
    config = json.load(open(os.path.join(path, "config.json")))
    kv = config.get("num_key_value_heads", config["num_attention_heads"])
    head_dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    bases = work / f"{model}.bases.safetensors"
    for share in (float(s) for s in shares.split()):
        rank = max(1, round(share * kv * head_dim))
        specs = {"palu-weights": ["palu", "--rank", str(rank)],
                 "palu-calibrated": [f"{bases}:group={kv}", "--rank", str(rank)],
                 "palu-per-head": ["palu:group=1", "--rank", str(rank)]}
        for domain, text in (("in-domain", indomain), ("other-domain", "data/text/wikitext2/wiki.test.raw")):
            for method, lowrank in specs.items():
                cmd = [f"{BIN}/kvc-eval", "kl", "-m", path, "-t", "1", "-f", str(text), "-c", "256",
                       "--max-windows", windows, "--lowrank", *lowrank, "--json"]
                r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                rows.append({"model": model, "domain": domain, "target_share": share, "method": method,
                             "rank": rank, "kl": f"{r['kl']:.4f}", "ppl": f"{r['ppl_compressed']:.2f}",
                             "exact_ppl": f"{r['ppl_reference']:.2f}", "kept_share": f"{1 - r['compression_ratio']:.3f}",
                             "windows": windows})
with open(f"{out}/palu_matched_memory.csv.part", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
os.replace(f"{out}/palu_matched_memory.csv.part", f"{out}/palu_matched_memory.csv")
PY
cat "$OUT/palu_matched_memory.csv"
