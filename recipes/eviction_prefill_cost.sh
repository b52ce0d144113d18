#!/usr/bin/env bash
# Prefill time of every registered press against the uncompressed prefill, same run: on SmolLM2-135M-Instruct
# Q4_1 (scripts/model_path.sh smollm2-135m), a prompt of N tokens (default 1024) from
# data/text/pg_essays/addiction.txt, THREADS threads (default 2). Each repeat (REPEATS, default 3) runs, for
# every press in `kvc-generate --list-presses` order, the uncompressed prefill and then the press's, so each
# press has its own alternated pairs; the table gives the medians and the median of the pairs' ratios
# (kvc-generate's prefill_seconds: the prompt's forward pass with the press's scoring and compression, not
# the model's load). Presses run at --ratio 0.5, those that size themselves at the parameter in SIZED below;
# kept_share is the KV payload after the prefill over the uncompressed one.
# Writes OUT/prefill_cost.csv (default data/results/eviction); rows of presses a run leaves out stay as they were.
#   recipes/eviction_prefill_cost.sh
#   N=2048 REPEATS=5 PRESSES="snapkv kvzip" recipes/eviction_prefill_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
PROMPT=data/text/pg_essays/addiction.txt
N=${N:-1024}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
OUT=${OUT:-data/results/eviction}
# decoding and cam leave the prompt whole and act while decoding (recipes/decoding_compression.sh).
PRESSES=${PRESSES:-$("$BIN/kvc-generate" --list-presses | awk '$1 != "none" && $1 != "decoding" && $1 != "cam" {print $1}')}
# The presses that size themselves, at a setting that compresses (their defaults keep everything or need one).
declare -A SIZED=([think]="think:channels=0.5" [simlayerkv]="simlayerkv:threshold=0.9"
                  [duo_attention]="duo_attention:streaming=0.5" [dms]="dms:base=keydiff,threshold=-0.5")
# The presses that read a file, with the one the leaderboard made for this model (at --ratio 0.5).
declare -A WITH_FILE=([lukv]="lukv:curve=data/results/leaderboard/smollm2/lukv.safetensors")
# KVC_SMOKE=1 (the documentation's tests): the repository's model, a short prompt, two presses, once.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; N=64; REPEATS=1; PRESSES="snapkv dms"; OUT=$(mktemp -d)
fi
MODEL=${MODEL:-$(scripts/model_path.sh smollm2-135m)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
run() {  # run NAME SPEC [ratio flags...]: one prefill, its stats in TMP/NAME.json
  local name=$1 spec=$2
  shift 2
  "$BIN/kvc-generate" -m "$MODEL" -f "$PROMPT" --prompt-tokens "$N" -n 1 -t "$THREADS" -q --press "$spec" "$@" \
    --stats-json "$TMP/$name.json" > /dev/null 2>&1
}
for i in $(seq 1 "$REPEATS"); do
  for press in $PRESSES; do
    run "none.$press.$i" none
    if [ -n "${SIZED[$press]:-}" ]; then
      run "$press.$i" "${SIZED[$press]}"
    elif [ -n "${WITH_FILE[$press]:-}" ]; then
      run "$press.$i" "${WITH_FILE[$press]}" --ratio 0.5
    else
      run "$press.$i" "$press" --ratio 0.5
    fi
  done
  echo "repeat $i of $REPEATS done" >&2
done
mkdir -p "$OUT"
python3 - "$TMP" "$REPEATS" "$OUT/prefill_cost.csv" "$MODEL" "$THREADS" $PRESSES <<'PY'
import csv, json, os, statistics, sys
tmp, repeats, out, model, threads, presses = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
load = lambda name: json.load(open(f"{tmp}/{name}.json"))
rows = []
for press in presses:
    base = [load(f"none.{press}.{i}") for i in range(1, repeats + 1)]
    runs = [load(f"{press}.{i}") for i in range(1, repeats + 1)]
    pairs = [r["prefill_seconds"] / b["prefill_seconds"] for r, b in zip(runs, base)]
    rows.append({"press": press, "spec": runs[0]["compression"], "prompt_tokens": runs[0]["prompt_tokens"],
                 "none_seconds": f"{statistics.median(b['prefill_seconds'] for b in base):.3f}",
                 "press_seconds": f"{statistics.median(r['prefill_seconds'] for r in runs):.3f}",
                 "ratio_median": f"{statistics.median(pairs):.3f}",
                 "ratio_min": f"{min(pairs):.3f}", "ratio_max": f"{max(pairs):.3f}",
                 "kept_share": f"{runs[0]['kv_payload_bytes'] / base[0]['kv_payload_bytes']:.3f}",
                 "repeats": repeats, "threads": threads, "model": os.path.basename(model)})
# Rows of presses this run did not measure stay as they were (PRESSES="a b" re-measures a and b alone).
measured = {r["press"] for r in rows}
kept = [r for r in csv.DictReader(open(out))] if os.path.exists(out) else []
rows = [r for r in kept if r["press"] not in measured] + rows
with open(out + ".part", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[-1]))
    w.writeheader()
    w.writerows(rows)
os.replace(out + ".part", out)
for r in rows:
    print(f"{r['press']:24s} {r['ratio_median']}x  ({r['ratio_min']}-{r['ratio_max']}; kept {r['kept_share']})")
PY
