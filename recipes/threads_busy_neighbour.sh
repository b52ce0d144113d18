#!/usr/bin/env bash
# Default threads vs -t 1 with and without a busy neighbour (one CPU-bound shell loop, bounded in time):
# the quickstart on stories260K and kvc-bench on the 134M model at 512 context. Settings alternate
# within each repeat, so each ratio to -t 1 comes from back-to-back runs. Writes
# data/results/threads/busy_neighbour.csv and prints medians with their spread.
#   KVC_BIN=DIR      tools to measure (default build/bin), e.g. an older build for a before/after
#   KVC_REPEATS=N    repeats per condition (default 3; stories260K gets 3N); KVC_SMOKE=1: stories260K only
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${KVC_BIN:-build/bin}"
CKPT="${KVC_THREADS_CKPT:-/tmp/kvc-llama-125m}"
REPEATS="${KVC_REPEATS:-3}"
OUT_DIR=data/results/threads
CSV="${KVC_THREADS_CSV:-$OUT_DIR/busy_neighbour.csv}"
MODELS="stories260K llama-125m"
if [ -n "${KVC_SMOKE:-}" ]; then MODELS=stories260K; REPEATS=1; fi
SETTINGS=("default" "-t 2" "-t 1")
mkdir -p "$(dirname "$CSV")"
TMP=$(mktemp -d)
NEIGHBOUR=""
cleanup() {
  if [ -n "$NEIGHBOUR" ]; then kill "$NEIGHBOUR" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

case " $MODELS " in *" llama-125m "*)
  [ -f "$CKPT/model.safetensors" ] || "$BIN/kvc-make-checkpoint" --preset llama-125m --context 4096 -o "$CKPT" >&2 ;;
esac

# One run; prints "threads,prefill_tok_s,decode_tok_s" (threads empty where the tool does not say).
run_one() {
  local model=$1 setting=$2 flags=""
  [ "$setting" = default ] || flags=$setting
  if [ "$model" = stories260K ]; then
    # shellcheck disable=SC2086
    "$BIN/kvc-generate" -m data/models/stories260K -p "Once upon a time" -n 60 $flags >/dev/null 2>"$TMP/err"
    sed -n 's/.* at \([0-9.]*\) tok\/s, [0-9]* generated at \([0-9.]*\) tok\/s.*/,\1,\2/p' "$TMP/err" | tail -1
  else
    # shellcheck disable=SC2086
    "$BIN/kvc-bench" -m "$CKPT" --contexts 512 --decode-tokens 16 $flags >"$TMP/out" 2>&1
    local threads
    threads=$(sed -n 's/.* \([0-9]*\) threads$/\1/p' "$TMP/out" | tail -1)
    awk -F'|' -v t="$threads" '$1 ~ /^ *512 *$/ {gsub(/ /, ""); print t "," $2 "," $5}' "$TMP/out" | tail -1
  fi
}

echo "model,setting,condition,repeat,threads,prefill_tok_s,decode_tok_s,load1,runnable" >"$CSV"
for condition in idle busy; do
  if [ "$condition" = busy ]; then
    timeout 1800 sh -c 'while :; do :; done' &
    NEIGHBOUR=$!
    sleep 1
  fi
  for model in $MODELS; do
    # The tiny model's runs last milliseconds: more repeats. Each repeat starts the rotation one
    # setting later, so no setting always runs first.
    n=$REPEATS
    [ "$model" = stories260K ] && n=$((3 * REPEATS))
    for ((r = 1; r <= n; r++)); do
      for ((i = 0; i < ${#SETTINGS[@]}; i++)); do
        setting=${SETTINGS[$(((i + r) % ${#SETTINGS[@]}))]}
        read -r load1 _ _ runnable _ </proc/loadavg
        result=$(run_one "$model" "$setting")
        echo "$model,$setting,$condition,$r,$result,$load1,${runnable%/*}" | tee -a "$CSV" >&2
      done
    done
  done
  if [ -n "$NEIGHBOUR" ]; then kill "$NEIGHBOUR" 2>/dev/null || true; wait "$NEIGHBOUR" 2>/dev/null || true; NEIGHBOUR=""; fi
done

# Medians per cell, and each run's decode ratio to the -t 1 run of the same repeat (median, min-max).
python3 - "$CSV" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
one = {(r["model"], r["condition"], r["repeat"]): float(r["decode_tok_s"]) for r in rows if r["setting"] == "-t 1"}
cells = {}
for r in rows:
    cells.setdefault((r["model"], r["setting"], r["condition"]), []).append(r)
print(f"{'model':<12} {'setting':<8} {'condition':<9} {'decode tok/s (median, min-max)':<32} {'vs -t 1 (median, min-max)':<26} load1")
for (model, setting, condition), rs in cells.items():
    dec = [float(r["decode_tok_s"]) for r in rs]
    ratio = [float(r["decode_tok_s"]) / one[(model, condition, r["repeat"])] for r in rs]
    load = [float(r["load1"]) for r in rs]
    print(f"{model:<12} {setting:<8} {condition:<9} {statistics.median(dec):>9.1f} ({min(dec):.1f}-{max(dec):.1f}){'':<8}"
          f" {statistics.median(ratio):>6.2f} ({min(ratio):.2f}-{max(ratio):.2f}){'':<6} {min(load):.1f}-{max(load):.1f}")
EOF
