#!/usr/bin/env bash
# Token-wise adaptive low-rank KV cache on stories260K: calibrate PCA bases, train gates at several
# alphas, then KL/perplexity vs retain rate for adaptive and fixed rank, per-token rank picture and
# decode throughput. Results land in data/results/lowrank/ (small JSON/TSV/PNG files).
# Usage: recipes/lowrank_stories260k.sh [BIN_DIR]   (default: build/bin)
set -euo pipefail
BIN=${1:-build/bin}
M=data/models/stories260K
OUT=data/results/lowrank
WORK=${WORK:-/tmp/kvc-lowrank}
mkdir -p "$OUT" "$WORK"
# Gates are trained on the first 25,000 bytes of the TinyStories excerpt, evaluated on the rest.
TRAIN=$WORK/train.txt
EVAL=$WORK/heldout.txt
head -c 25000 data/text/tinystories/tinystories_excerpt_30k.txt > $TRAIN
tail -c +25001 data/text/tinystories/tinystories_excerpt_30k.txt > $EVAL
T="-t ${THREADS:-1}"
# KVC_SMOKE=1 (the README test suite): the same commands at small sizes.
if [ -n "${KVC_SMOKE:-}" ]; then STEPS=4; ALPHAS=16; fi
KL="--window 256 --max-windows 8 --json"

"$BIN/kvc-calibrate" -m $M $T --data $TRAIN --tokens 100000 --seq-len 256 -o $WORK/bases.safetensors --json \
  > $OUT/calibrate_stories260k.json

for A in ${ALPHAS:-4 16 64}; do
  "$BIN/kvc-train" -m $M $T --bases $WORK/bases.safetensors --data $TRAIN --alpha $A --steps ${STEPS:-60} \
    --seq-len 128 --batch 2 --lr 0.02 --eval-every 30 --checkpoint $WORK/train_$A.ckpt \
    -o $WORK/gates_$A.safetensors --json > $OUT/train_alpha$A.json
done

: > $OUT/kl_stories260k.jsonl
for R in 16 10 6; do   # 50%, 31%, 19% of d_kv = 32
  "$BIN/kvc-eval" kl -m $M $T --file $EVAL $KL --lowrank $WORK/bases.safetensors --rank $R \
    | jq -c "{method: \"fixed\", rank: $R, kl, top1_agreement, ppl_compressed, ppl_reference, memory_fraction: (1 - .compression_ratio)}" \
    >> $OUT/kl_stories260k.jsonl
done
for A in ${ALPHAS:-4 16 64}; do
  for TAU in 0.1 0.3 0.5; do
    "$BIN/kvc-eval" kl -m $M $T --file $EVAL $KL --lowrank $WORK/gates_$A.safetensors:tau=$TAU \
      | jq -c "{method: \"adaptive\", alpha: $A, tau: $TAU, kl, top1_agreement, ppl_compressed, ppl_reference, memory_fraction: (1 - .compression_ratio)}" \
      >> $OUT/kl_stories260k.jsonl
  done
done

SENT="Once upon a time, there was a little girl named Lily. She loved to play with her toys in the enormous garden."
A_PIC=${A_PIC:-16}
"$BIN/kvc-train" inspect -m $M $T --lowrank $WORK/gates_$A_PIC.safetensors --text "$SENT" --tsv $OUT/ranks_sample.tsv --json \
  > $OUT/ranks_sample.json
gnuplot -e "tsv='$OUT/ranks_sample.tsv'; out='$OUT/ranks_per_token.png'" recipes/lowrank_ranks.gp

# SnapKV (one token set per layer: heads=shared) at half the prompt, alone and with low-rank storage.
: > $OUT/snapkv_lowrank_stories260k.jsonl
for LR in "" "--lowrank $WORK/gates_16.safetensors" "--lowrank $WORK/bases.safetensors --rank 12"; do
  "$BIN/kvc-eval" kl -m $M $T --file $EVAL $KL --press snapkv:heads=shared,window=16 --ratio 0.5 $LR \
    | jq -c "{method, kl, top1_agreement, ppl_compressed, ppl_reference, memory_fraction: (1 - .compression_ratio)}" \
    >> $OUT/snapkv_lowrank_stories260k.jsonl
done

# Decode throughput, full vs low-rank cache, alternating in one process.
head -c 400 $EVAL > $WORK/prompt.txt
: > $OUT/decode_throughput_stories260k.jsonl
for LR in "$WORK/gates_16.safetensors" "$WORK/bases.safetensors --rank 12"; do
  "$BIN/kvc-train" inspect -m $M $T --lowrank $LR --file $WORK/prompt.txt --bench 150 --repeats 3 --json \
    | jq -c "{lowrank: \"$LR\", prompt_tokens: (.tokens|length), memory_fraction, decode_tokens_per_second_full, decode_tokens_per_second_lowrank, decode_relative}" \
    >> $OUT/decode_throughput_stories260k.jsonl
done
