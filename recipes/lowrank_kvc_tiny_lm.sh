#!/usr/bin/env bash
set -euo pipefail
# Usage: recipes/lowrank_kvc_tiny_lm.sh [BIN_DIR] -- adaptive (one alpha, tau sweep) vs fixed rank on kvc-tiny-lm.
# Trains on one Austen novel and evaluates on another: they are larger optional data, read from
# KVC_SHARED (default ../shared, data/austen/), as is the model (scripts/model_path.sh kvc-tiny-lm).
BIN=${1:-build/bin}; M=$(scripts/model_path.sh kvc-tiny-lm); OUT=data/results/lowrank; WORK=/tmp/kvc-lowrank; T="-t 1"
AUSTEN=${KVC_SHARED:-../shared}/data/austen
[ -d "$AUSTEN" ] || { echo "lowrank_kvc_tiny_lm: $AUSTEN not found; set KVC_SHARED to the folder holding data/austen" >&2; exit 1; }
mkdir -p $WORK $OUT
head -c 120000 $AUSTEN/pride_and_prejudice.txt > $WORK/tiny_train.txt
tail -c 20000 $AUSTEN/persuasion.txt > $WORK/tiny_eval.txt
KL="--window 256 --max-windows 6 --json"
$BIN/kvc-calibrate -m $M $T --data $WORK/tiny_train.txt --tokens 30000 --seq-len 256 -o $WORK/tiny_bases.safetensors --json > $OUT/calibrate_kvc-tiny-lm.json
$BIN/kvc-train -m $M $T --bases $WORK/tiny_bases.safetensors --data $WORK/tiny_train.txt --alpha 16 --steps 40 \
  --seq-len 128 --batch 2 --lr 0.02 --eval-every 20 --checkpoint $WORK/tiny_16.ckpt -o $WORK/tiny_gates_16.safetensors --json > $OUT/train_kvc-tiny-lm_alpha16.json
: > $OUT/kl_kvc-tiny-lm.jsonl
for R in 32 19 13; do
  $BIN/kvc-eval kl -m $M $T --file $WORK/tiny_eval.txt $KL --lowrank $WORK/tiny_bases.safetensors --rank $R \
    | jq -c "{method: \"fixed\", rank: $R, kl, top1_agreement, ppl_compressed, ppl_reference, memory_fraction: (1 - .compression_ratio)}" >> $OUT/kl_kvc-tiny-lm.jsonl
done
for TAU in 0.1 0.3 0.5; do
  $BIN/kvc-eval kl -m $M $T --file $WORK/tiny_eval.txt $KL --lowrank $WORK/tiny_gates_16.safetensors:tau=$TAU \
    | jq -c "{method: \"adaptive\", alpha: 16, tau: $TAU, kl, top1_agreement, ppl_compressed, ppl_reference, memory_fraction: (1 - .compression_ratio)}" >> $OUT/kl_kvc-tiny-lm.jsonl
done
echo part4 done
