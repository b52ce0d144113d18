#!/usr/bin/env bash
# Ctrl-C in the middle of each tool's long phase: the seconds from SIGINT to exit, the exit status, and
# what the run left at its output path. Each command starts, runs WAIT seconds (default 3), gets one
# SIGINT, and is timed until it exits. Writes data/results/cli/interrupts.{md,json}.
#   recipes/interrupt_latency.sh
#   WAIT=10 recipes/interrupt_latency.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVC_BIN:-build/bin}
WAIT=${WAIT:-3}
OUT=data/results/cli
TINY=data/models/stories260K
WIKI=data/text/wikitext2/wiki.test.raw
STORY=data/text/tinystories/tinystories_excerpt_30k.txt
SMOL=$(scripts/model_path.sh smollm2-135m)
# KVC_SMOKE=1 (the documentation's tests): a short wait, into a scratch folder.
if [ -n "${KVC_SMOKE:-}" ]; then WAIT=0.5; OUT=$(mktemp -d); fi
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 28000 "$WIKI" > "$work/long_prompt.txt"   # about 6,500 SmolLM2 tokens: a prefill of several seconds
"$BIN/kvc-calibrate" -m "$TINY" -f "$STORY" --tokens 512 -c 64 -o "$work/bases.safetensors" > /dev/null 2>&1

# name | output path ("-" for none) | command
runs=(
  "kvc-generate, decoding|-|$BIN/kvc-generate -m $TINY -p Once --press h2o --budget 64 -n 100000000 --ignore-eos"
  "kvc-generate, a 6,500-token prefill (SmolLM2)|-|$BIN/kvc-generate -m $SMOL -f $work/long_prompt.txt -n 8 -c 8192"
  "kvc-eval ppl|-|$BIN/kvc-eval ppl -m $TINY -f $WIKI -c 16 -t 1"
  "kvc-eval kl|-|$BIN/kvc-eval kl -m $TINY -f $WIKI -c 64 --max-windows 0 -t 1"
  "kvc-eval needle|$work/needle|$BIN/kvc-eval needle -m $TINY --haystack $STORY --lengths 256,384 --depths 0,0.25,0.5,0.75,1 --samples 50 --out-dir $work/needle"
  "kvc-eval sweep (SmolLM2, 29 needle cells, decoded in lockstep)|$work/sweep|$BIN/kvc-eval sweep -m $SMOL --methods none,snapkv,h2o,tova,pyramidkv,knorm,keydiff,kvzip --ratios 0.25,0.5,0.75,0.9 --tasks needle --haystack data/text/pg_essays --needle-lengths 2048 --needle-depths 0.5 --samples 2 --out-dir $work/sweep"
  "kvc-calibrate|$work/bases_out.safetensors|$BIN/kvc-calibrate -m $TINY -f $WIKI --tokens 100000000 -c 64 -o $work/bases_out.safetensors"
  "kvc-train|$work/gates.safetensors|$BIN/kvc-train -m $TINY -f $STORY --bases $work/bases.safetensors --steps 1000000 -c 64 -o $work/gates.safetensors"
  "kvc-cluster build (SmolLM2, 6,500 tokens)|$work/store.kvs|$BIN/kvc-cluster build -m $SMOL -f $work/long_prompt.txt --prompt-tokens 0 --store $work/store.kvs --index $work/store.safetensors"
  "kvc-bench, an 8,192-token prefill (SmolLM2)|-|$BIN/kvc-bench -m $SMOL --contexts 8192 --decode-tokens 64"
  "kvc-profile|$work/profile|$BIN/kvc-profile -m $TINY -f $WIKI -c 256 --windows 100000 --no-plot --out-dir $work/profile"
)

rows=()
for run in "${runs[@]}"; do
  IFS='|' read -r name output command <<< "$run"
  # Job control on: a background job then keeps SIGINT as a terminal's Ctrl-C would deliver it.
  set -m
  $command > "$work/stdout" 2> "$work/stderr" &
  pid=$!
  set +m
  sleep "$WAIT"
  start=$(date +%s.%N)
  kill -INT "$pid" 2> /dev/null || true
  status=0
  wait "$pid" || status=$?
  end=$(date +%s.%N)
  left="nothing"
  if [ "$output" != "-" ] && [ -e "$output" ]; then
    if [ -d "$output" ]; then left="$(ls "$output" | tr '\n' ' ')"; left=${left:-"an empty folder"}; else left="$(basename "$output") ($(stat -c %s "$output") bytes)"; fi
  fi
  [ "$output" = "-" ] && left="(no output file)"
  said=$(tr '\r' '\n' < "$work/stderr" | grep -v '^ *$' | tail -1 | sed 's/|/\\|/g' | cut -c1-160 || true)
  rows+=("$(python3 -c 'import json,sys; print(json.dumps({"tool": sys.argv[1], "seconds_to_exit": round(float(sys.argv[3]) - float(sys.argv[2]), 2), "exit_status": int(sys.argv[4]), "left": sys.argv[5], "said": sys.argv[6]}))' \
    "$name" "$start" "$end" "$status" "$left" "$said")")
  if [ "$output" != "-" ]; then rm -rf "$output"; fi
done

printf '%s\n' "${rows[@]}" > "$work/rows.jsonl"
python3 - "$work/rows.jsonl" "$OUT" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
out = sys.argv[2]
json.dump(rows, open(out + "/interrupts.json", "w"), indent=1)
lines = ["| tool, phase | seconds from SIGINT to exit | exit status | left at the output path | last line on stderr |",
         "|---|---:|---:|---|---|"]
for r in rows:
    lines.append(f"| {r['tool']} | {r['seconds_to_exit']:.2f} | {r['exit_status']} | {r['left']} | {r['said']} |")
open(out + "/interrupts.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
