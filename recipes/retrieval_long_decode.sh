#!/bin/sh
# Clustered KV retrieval on kvc-tiny-lm: a 64-token prompt decoded for thousands of tokens
# with the exact cache, while adaptive, static, local and no-clustering retrieval are measured side by
# side; then the ablations (B_max sweep, dual-head vs naive layout, cluster-aligned vs LRU cache,
# next-layer prefetch). Results (steps.csv.gz, summary.json, summary.md, PNGs) go under
# data/results/retrieval/. The random-weight long run is recipes/retrieval_random_long.sh.
# Usage: recipes/retrieval_long_decode.sh [BUILD_DIR] [OUT_DIR] [STEPS] [ABLATION_STEPS] [PARTS]
#   (run from the repository root; PARTS: any of "main bmax layout cache prefetch crash", default
#   all; "ablations" stands for "bmax layout cache prefetch". THREADS (default 1): the ablations' --threads.)
set -eu
BUILD=${1:-build}
OUT=${2:-data/results/retrieval}
STEPS=${3:-2000}
ABLATION_STEPS=${4:-2000}
PARTS=${5:-"main ablations crash"}
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then STEPS=40; ABLATION_STEPS=40; fi
# Measured on kvc-tiny-lm (2.4M parameters, from ../shared: scripts/model_path.sh); the smoke run uses the
# repository's kvc-micro-lm.
. recipes/lib/needle_model.sh
MODEL=$(needle_model)

case " $PARTS " in *" ablations "*) PARTS="$PARTS bmax layout cache prefetch" ;; esac
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
THREADS=${THREADS:-1}
PROMPT=data/text/pg_essays/addiction.txt
CLUSTER="$BUILD/bin/kvc-cluster"
REPLAY="$CLUSTER replay --threads $THREADS"
# Every strategy reads the same entry budget per KV head and step (clusters in score order until
# BUDGET entries; none: the exact top BUDGET entries), so recall is compared at equal reads.
BUDGET=${BUDGET:-128}
mkdir -p "$OUT"

# Per-head thresholds τ_h calibrated on the prompt and stored in the index; replays read them back.
if has main; then
"$CLUSTER" build -m $MODEL -f $PROMPT --prompt-tokens 64 -s adaptive --store "$OUT/calibration.kvs" \
  --index "$OUT/calibration.safetensors" --json > "$OUT/calibration.json"
"$CLUSTER" verify --index "$OUT/calibration.safetensors"

# 1. The four strategies in one run (same tokens, same prompt clusters).
"$CLUSTER" replay -m $MODEL -f $PROMPT --prompt-tokens 64 -n "$STEPS" --index "$OUT/calibration.safetensors" \
  -s adaptive:budget=$BUDGET,label=adaptive -s static:budget=$BUDGET,label=static \
  -s local:budget=$BUDGET,label=local -s none:budget=$BUDGET,label=none --out-dir "$OUT/long_decode" --plot
fi
# 2. Delayed-split buffer sweep: B_max 0..32, bytes transferred. With the main setting (budget 128,
# τ_h = largest prefill variance) a new key's nearest cluster is nearly always in RAM already, so
# almost nothing is buffered. Here fewer clusters are in RAM (budget 32, 16 KiB cache) and τ_h is
# the 25% quantile of the prefill variances (more splits), so the buffer decides when splits load.
if has bmax; then
SWEEP="budget=32,cache_kb=16,tau_q=0.25"
$REPLAY -m $MODEL -f $PROMPT --prompt-tokens 64 -n "$ABLATION_STEPS" \
  -s adaptive:$SWEEP,bmax=0,label=bmax0 -s adaptive:$SWEEP,bmax=4,label=bmax4 \
  -s adaptive:$SWEEP,bmax=8,label=bmax8 -s adaptive:$SWEEP,bmax=16,label=bmax16 \
  -s adaptive:$SWEEP,bmax=32,label=bmax32 --out-dir "$OUT/bmax_sweep" --plot
fi

# 3. Layout: dual-head pools vs naive contiguous extents (data moved by updates).
if has layout; then
$REPLAY -m $MODEL -f $PROMPT --prompt-tokens 64 -n "$ABLATION_STEPS" --index "$OUT/calibration.safetensors" \
  -s adaptive:budget=$BUDGET,layout=dual,label=adaptive-dual -s adaptive:budget=$BUDGET,layout=naive,label=adaptive-naive \
  -s static:budget=$BUDGET,layout=dual,label=static-dual -s static:budget=$BUDGET,layout=naive,label=static-naive --out-dir "$OUT/layout" --plot
fi

# 4. RAM cache policy at a cache of 64 and 256 KiB: cluster-aligned vs LRU (hit rate).
if has cache; then
$REPLAY -m $MODEL -f $PROMPT --prompt-tokens 64 -n "$ABLATION_STEPS" --index "$OUT/calibration.safetensors" \
  -s adaptive:budget=$BUDGET,cache=aligned,cache_kb=64,label=aligned-64K \
  -s adaptive:budget=$BUDGET,cache=lru,cache_kb=64,label=lru-64K \
  -s adaptive:budget=$BUDGET,cache=aligned,cache_kb=256,label=aligned-256K \
  -s adaptive:budget=$BUDGET,cache=lru,cache_kb=256,label=lru-256K \
  --out-dir "$OUT/cache" --plot
fi

# 5. Next-layer prefetch on and off, side by side (same tokens; outputs identical, reads differ).
if has prefetch; then
$REPLAY -m $MODEL -f $PROMPT --prompt-tokens 64 -n "$ABLATION_STEPS" --index "$OUT/calibration.safetensors" \
  -s adaptive:budget=$BUDGET,label=adaptive -s adaptive:budget=$BUDGET,prefetch=1,label=adaptive-prefetch \
  -s none:budget=$BUDGET,label=none -s none:budget=$BUDGET,prefetch=1,label=none-prefetch \
  --out-dir "$OUT/prefetch" --plot
fi

# 6. Crash safety: a rebuild killed (SIGKILL) half-way through its 3rd page write; verify must refuse.
if has crash; then
{
  KVC_STORE_CRASH_AFTER_PAGES=2 "$CLUSTER" build -m $MODEL -f $PROMPT --prompt-tokens 64 -s adaptive \
    --store "$OUT/calibration.kvs" --index "$OUT/crashed.safetensors" || echo "build exited with status $?"
  "$CLUSTER" verify --index "$OUT/calibration.safetensors" || echo "verify exited with status $?"
  "$CLUSTER" build -m $MODEL -f $PROMPT --prompt-tokens 64 -s adaptive --store "$OUT/calibration.kvs" \
    --index "$OUT/calibration.safetensors"
  "$CLUSTER" verify --index "$OUT/calibration.safetensors"
} > "$OUT/crash_safety.txt" 2>&1
fi

# The replay stores are scratch (the index keeps only what the replays read: thresholds).
rm -f "$OUT"/*/store-*.kvs
# Each replay's per-step table is kept gzipped (-n: the same steps give the same bytes); the plots'
# steps_{grouped,cum,avg}.csv stay beside it for recipes/replot.sh and are not committed.
for part in long_decode bmax_sweep layout cache prefetch; do
  if [ -f "$OUT/$part/steps.csv" ]; then gzip -9nf "$OUT/$part/steps.csv"; fi
done
