#!/usr/bin/env bash
# MatryoshkaKV-style trained bases against the PCA basis they start from and Palu's joint low rank, at
# matched memory (kept shares 0.5 / 0.3 / 0.2 of the cache) on SmolLM2-135M-Instruct (every layer
# compressed; d_kv = 3 KV heads x 64). KL and perplexity against the exact model of
#   pca          --lowrank bases:ranks=R            the calibration's PCA basis, R = round(share * d_kv)
#   matryoshka   --lowrank nested:ranks=R           the same basis rotated by kvc-train --target matryoshka
#                                                   (--loss kl, ranks drawn from 1/8 .. 7/8 of d_kv)
#   pca-searched / matryoshka-searched  :share=S    ranks per layer and K/V from the PCA eigenvalues
#   palu         --lowrank palu --rank R            Palu's J-LRD: one basis per layer from the SVD of the
#                                                   K/V projection weights (no calibration text)
#   adaptive     --lowrank GATES:tau=T              token-wise gates from kvc-train on the PCA basis (one gate
#                                                   set per entry of GATE_SETS, loss:alpha, --loss kl like the
#                                                   nested basis, STEPS steps too); for each share, each gate
#                                                   set's tau is bisected on the training text until it keeps
#                                                   the share there, and the one with the lowest KL there is
#                                                   evaluated (on the evaluation texts it keeps what it keeps:
#                                                   reported)
# Bases and training use the first 80% of the essays; evaluation the last 20% (held out, same domain) and
# WikiText-2 (another domain), WINDOWS windows of CTX tokens with the second half compressed (fed 64 tokens
# a step, which a low-rank cache compresses as 1 token a step would). The trained bases are kept in WORK
# (an interrupted training continues from its checkpoint).
# Writes data/results/lowrank/matryoshka_smollm2.{json,md}; about 3 hours here with 2 threads:
# calibration 8, training STEPS steps of 4 windows of 128 tokens 42 (20 tok/s), evaluation 29; and each
# gate set about 35 minutes of training (20 tok/s) and 5 of tau bisection per share.
#   recipes/lowrank_matryoshka.sh
#   STEPS=300 recipes/lowrank_matryoshka.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
OUT="${OUT:-data/results/lowrank}"
THREADS="${THREADS:-2}"
TOKENS=50000
WINDOWS=4
CTX=512
STEPS="${STEPS:-100}"
BATCH=4
LR=0.001
SHARES="0.5 0.3 0.2"
GATE_SETS=${GATE_SETS:-kl:1 kl:4}
BISECT=8
MODEL=""
work=${WORK:-build/recipe-work/lowrank_matryoshka}
# KVC_SMOKE=1 (the documentation's tests): the repository's small Llama, a few steps, one window, one share.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/stories260K; TOKENS=2000; WINDOWS=1; CTX=128; STEPS=2; BATCH=1; SHARES=0.5; GATE_SETS=kl:4; BISECT=1; OUT=$(mktemp -d)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
[ -n "$MODEL" ] || MODEL=$(scripts/model_path.sh smollm2-135m)
mkdir -p "$OUT" "$work"
. recipes/lib/essay_bases.sh
bases=$(essay_bases "$work" "$BIN" "$MODEL" "$TOKENS" "$THREADS" ${KVC_SMOKE:+80000})
nested="matryoshka.$bases.s$STEPS.b$BATCH.lr$LR"
source recipes/lib/gate_training.sh
train_gate_set "$work/$nested" "$BIN/kvc-train" -m "$MODEL" --dtype float32 -t "$THREADS" --bases "$work/$bases.safetensors" \
  -f "$work/train.txt" --target matryoshka --loss kl --steps "$STEPS" -c 128 --batch "$BATCH" --lr "$LR" \
  --eval-every 25 --eval-windows 4
gates_name() { echo "gates.$bases.${1%%:*}.${1#*:}.s$STEPS.b$BATCH"; }
names=()
for set in $GATE_SETS; do
  train_gate_set "$work/$(gates_name "$set")" "$BIN/kvc-train" -m "$MODEL" --dtype float32 -t "$THREADS" \
    --bases "$work/$bases.safetensors" -f "$work/train.txt" --loss "${set%%:*}" --alpha "${set#*:}" --steps "$STEPS" \
    -c 128 --batch "$BATCH" --lr 0.02 --eval-every 25 --eval-windows 4
  names+=("$set=$(gates_name "$set")")
done
python3 - "$BIN" "$MODEL" "$work" "$OUT" "$WINDOWS" "$CTX" "$THREADS" "$bases" "$nested" "${names[*]}" "$BISECT" \
  $SHARES <<'PY'
import json, os, pathlib, sys
sys.path.insert(0, "recipes/lib")
from matched_memory import best_gate_set, kl_report
BIN, model, work, out = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4])
windows, ctx, threads = (int(x) for x in sys.argv[5:8])
bases, nested = work / f"{sys.argv[8]}.safetensors", work / f"{sys.argv[9]}.safetensors"
gate_sets = dict(entry.split("=") for entry in sys.argv[10].split())  # "loss:alpha" -> artifact name
bisect = int(sys.argv[11])
shares = [float(x) for x in sys.argv[12:]]
training = json.loads((work / f"{sys.argv[9]}.json").read_text())
gate_training = {s: json.loads((work / f"{n}.json").read_text()) for s, n in gate_sets.items()}
# For each share, the gate set and tau chosen on the training text (2 windows).
measure = lambda spec: kl_report(BIN, model, work / "train.txt", ctx, 2, threads, spec)
chosen = {share: best_gate_set(measure, {s: work / f"{n}.safetensors" for s, n in gate_sets.items()}, share, bisect)
          for share in shares}
dkv = json.loads((work / f"{sys.argv[8]}.json").read_text())["kv_dim"]
texts = {"in-domain": work / "eval.txt", "other-domain": pathlib.Path("data/text/wikitext2/wiki.test.raw")}
if len(shares) == 1:  # the smoke run
    del texts["other-domain"]
rows = []
for share in shares:
    rank = max(1, round(share * dkv))
    specs = {"pca": [f"{bases}:ranks={rank}"], "matryoshka": [f"{nested}:ranks={rank}"],
             "pca-searched": [f"{bases}:share={share}"], "matryoshka-searched": [f"{nested}:share={share}"],
             "palu": ["palu", "--rank", str(rank)]}
    if chosen[share] is not None:
        specs["adaptive"] = chosen[share]["spec"]
    for domain, text in texts.items():
        for method, spec in specs.items():
            r = kl_report(BIN, model, text, ctx, windows, threads, spec)
            rows.append({"share": share, "rank": rank, "domain": domain, "method": method, "kl": r["kl"],
                         "ppl": r["ppl_compressed"], "exact_ppl": r["ppl_reference"],
                         "kept_share": r["kept_share"], "windows": windows, "ctx": ctx})
            print(f"{share} {domain} {method}: KL {r['kl']:.4f} ppl {r['ppl_compressed']:.2f} "
                  f"(exact {r['ppl_reference']:.2f}), kept {r['kept_share']:.3f}", file=sys.stderr)
result = {"model": os.path.basename(model), "kv_dim": dkv, "training": {k: training[k] for k in ("steps_done", "tokens", "evals")},
          "gate_training": {s: {k: t[k] for k in ("steps_done", "tokens", "evals")} for s, t in gate_training.items()},
          "chosen": {str(k): v and {x: v[x] for x in ("label", "tau", "train_kl")} for k, v in chosen.items()},
          "rows": rows}
(out / "matryoshka_smollm2.json.part").write_text(json.dumps(result, indent=1) + "\n")
os.replace(out / "matryoshka_smollm2.json.part", out / "matryoshka_smollm2.json")
lines = [f"Held-out KL / perplexity at matched memory ({windows} windows of {ctx} tokens, second half compressed; "
         f"each cell KL / perplexity). Training: {training['steps_done']} steps, {training['tokens']} tokens.", ""]
methods = list(dict.fromkeys(r["method"] for r in rows))
for domain in texts:
    exact = next(r["exact_ppl"] for r in rows if r["domain"] == domain)
    lines += [f"**{domain}** (exact perplexity {exact:.2f})", "", "| method | " + " | ".join(f"{s:g} (rank {max(1, round(s * dkv))})" for s in shares) + " |",
              "|---" * (len(shares) + 1) + "|"]
    def cell(r):
        if r is None:
            return "—"
        kept = f" ({r['kept_share']:.3f})" if r["method"] == "adaptive" else ""
        return f"{r['kl']:.4f} / {r['ppl']:.2f}{kept}"
    for m in methods:
        cells = [cell(next((r for r in rows if r["domain"] == domain and r["method"] == m and r["share"] == s), None))
                 for s in shares]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines.append("")
if gate_sets:
    lines += ["adaptive: token-wise gates on the PCA basis, the cell's kept share of the cache in brackets (tau chosen "
              "on the training text). Chosen: " + ", ".join(f"{k}: the {v['label']} set, tau {v['tau']}" if v else f"{k}: none"
                                                         for k, v in chosen.items()) + ".", ""]
    for s, t in gate_training.items():
        lines += [f"Gate training, --loss {s.split(':')[0]} at alpha {s.split(':')[1]}, {t['steps_done']} steps, {t['tokens']} "
                  "tokens; held-out KL (kept share at tau 0.1) by step: " +
                  ", ".join(f"{e['step']}: {e['heldout_kl']:.3f} ({e['retain_hard']:.3f})" for e in t["evals"]), ""]
(out / "matryoshka_smollm2.md.part").write_text("\n".join(lines))
os.replace(out / "matryoshka_smollm2.md.part", out / "matryoshka_smollm2.md")
print("\n".join(lines))
PY
