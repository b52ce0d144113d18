#!/usr/bin/env bash
# The leaderboard on Gemma 3 270M (the GGUF scripts/setup.sh installs): every registered press at
# compression ratios 0.25/0.5/0.75/0.9, plus the uncompressed cache, on tasks where the uncompressed
# model has signal, at 4K tokens. One prefill per sample serves all 49 press cells (kvc-eval sweep
# --prefill shared). Presses act on the model's 3 global layers; its 15 sliding-window layers keep
# their 512-entry window, so the cache's measured compression is below the nominal ratio.
# Low-rank rows: fixed ranks of a PCA basis calibrated on WikiText-2 (another domain than the tasks'
# essays), alone (LOWRANK_RANKS, 128/77/51 of 256 dimensions keep 0.5/0.3/0.2 of the global layers) and
# storing what LOWRANK_PRESS keeps at every ratio (at the first rank; one token set per layer, since the
# low-rank latent is shared by the KV heads). Rank-searched rows (LOWRANK_SHARES): the same basis at
# share=S, which spends S of the global layers' payload on the ranks that keep the most of its variance
# (keys and values, layer by layer, from the calibration's eigenvalues), where a fixed rank spends it
# evenly. Low-rank caches change the prefill itself (it attends to the reconstructed keys): each low-rank
# row prefills on its own, and the LOWRANK_PRESS cells of a rank share one prefill into its cache.
# Trained-gate rows (GATES, loss:alpha of each gate set; empty: none): token-wise gates trained by kvc-train
# over that basis on WikiText-2 too (150 steps of 4 windows of 128 tokens, about 35 minutes a gate set
# here), at the gate set and tau that keep each share of GATE_SHARES of the global layers' cache on that
# text (recipes/lib/matched_memory.py, as the matched-memory recipe chooses them).
# Retrieval rows (RETRIEVAL): the clustered cache keeps every entry on storage and reads `budget`
# entries per KV head and step; its memory is the RAM it holds (sinks, window, buffers, centroids).
# Each prefills on its own too. (local re-clusters every 64 steps: with at most 24 new tokens per sample
# it equals static here, so it is not a row of its own.) Their KL rows are a task of their own,
# kl_retrieval: a retrieval cache picks entries per new token, and the KL schedule's 64 tokens a pass
# would attend to every entry, so there the scored half is fed one token a pass (the uncompressed
# model's KL and perplexity do not depend on how it is fed).
# Typed rows (TYPED): the dense cache with its keys and values stored in each type (as -ctk/-ctv store
# them), alone and under TYPED_PRESS at every ratio; each type prefills once per sample for its presses.
# LU-KV rows (LUKV, the press its budget curve ranks by; empty: none): the curve is made once for this model by
# kvc-profile --lukv-press on WikiText-2 (8 windows of 1,024 tokens, a horizon of 128; the global layers' 3
# heads) and kept in data/results/leaderboard/gemma3/lukv.safetensors with its lukv.csv.
# The presses that size themselves (a share of channels, a threshold, a share of heads) join at the
# settings of SIZED, as on SmolLM2 (empty: none; --methods all leaves them out). PAPER adds rows at a
# paper's own settings where the bare rows run others (committed_settings.sh): KVCompose's task-agnostic
# scoring of a repeated context (task=repeat,kernel=1), which takes a second pass per sample.
# METHODS (default all) is what the main sweep of each task runs, with SIZED and the LU-KV rows:
# METHODS=none with the row variables emptied adds the LU-KV rows alone.
# QUERY=agnostic compresses the context before the question is seen (into OUT=...-agnostic).
# Each task is a resumable sweep of its own: interrupt at will, re-run to continue. To continue in another
# clone, `save_progress OUT/<task>` (recipes/lib/committed_results.sh) keeps the finished samples in
# OUT/<task>/samples.jsonl.gz, which the next run unpacks.
# Writes OUT/<task>/results.{jsonl.gz,md,csv} (the sweep's results.jsonl, gzipped at the end:
# recipes/lib/committed_results.sh), OUT/leaderboard.md (mean score ± standard error over the
# samples, and the measured share of the cache kept) and OUT/leaderboard.png (score vs cache kept).
#   recipes/leaderboard_gemma3.sh                      # needle, niah_single_2, niah_multikey_1
#   TASKS="needle" SAMPLES=10 recipes/leaderboard_gemma3.sh
#   TASKS=kl recipes/leaderboard_gemma3.sh             # KL / perplexity with the first half compressed
#   TASKS=kl_retrieval recipes/leaderboard_gemma3.sh   # the same for the retrieval rows, one token a pass
#   QUERY=agnostic TASKS=needle LOWRANK_RANKS= LOWRANK_SHARES= GATES= RETRIEVAL= TYPED= recipes/leaderboard_gemma3.sh
#   METHODS=none SIZED= PAPER= TASKS=kl LOWRANK_RANKS= LOWRANK_SHARES= GATES= RETRIEVAL= TYPED= recipes/leaderboard_gemma3.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
MODEL=$(scripts/model_path.sh gemma3-270m)
LENGTH=4096
SAMPLES="${SAMPLES:-50}"
TASKS_ASKED="${TASKS:-}"
TASKS="${TASKS:-needle niah_single_2 niah_multikey_1}"
RATIOS=0.25,0.5,0.75,0.9
THREADS="${THREADS:-2}"
QUERY="${QUERY:-aware}"
OUT="${OUT:-data/results/leaderboard/gemma3$([ "$QUERY" = aware ] || echo "-$QUERY")}"
LOWRANK_RANKS="${LOWRANK_RANKS-128 77 51}"
LOWRANK_SHARES="${LOWRANK_SHARES-0.5 0.3 0.2}"
LOWRANK_PRESS="${LOWRANK_PRESS-snapkv:heads=shared}"
RETRIEVAL="${RETRIEVAL-adaptive:budget=1024 static:budget=1024 adaptive:budget=256}"
GATES="${GATES-kl:1 kl:4}"
TYPED="${TYPED-q8_0 q4_0}"
TYPED_PRESS="${TYPED_PRESS-snapkv}"
GATE_SHARES="0.5 0.3 0.2"
TRAIN_STEPS=150
TRAIN_BATCH=4
TRAIN_CTX=128
BISECT=8
CALIBRATION_TOKENS=50000
TRAIN_TEXT=data/text/wikitext2/wiki.test.raw
KL_TEXT=data/text/pg_essays/worked.txt
KL_WINDOW=2048
METHODS="${METHODS:-all}"
LUKV="${LUKV-expected_attention}"
SIZED="${SIZED-think:channels=0.5,simlayerkv:threshold=0.9,duo_attention:streaming=0.5,dms:base=keydiff,threshold=-0.5}"
PAPER="${PAPER-kvcompose:task=repeat,kernel=1,kvcompose_unstructured:task=repeat,kernel=1}"
LUKV_CONTEXT=1024
LUKV_WINDOWS=8
CURVE_DIR=data/results/leaderboard/gemma3
# KVC_SMOKE=1 (the README test suite): the repository's needle model, short prompts, two samples, the
# training text's first 100 KB.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; LENGTH=512; SAMPLES=2; TASKS="${TASKS_ASKED:-needle niah_single_2 kl kl_retrieval}"; OUT=$(mktemp -d)
  LOWRANK_RANKS=32; LOWRANK_SHARES=0.5; CALIBRATION_TOKENS=2000; KL_WINDOW=256; RETRIEVAL=adaptive:budget=64
  GATES=kl:4; GATE_SHARES=0.5; TYPED=q4_0; TRAIN_STEPS=1; TRAIN_BATCH=1; TRAIN_CTX=64; BISECT=1
  LUKV_CONTEXT=128; LUKV_WINDOWS=1; CURVE_DIR=$OUT; SIZED=; PAPER=
  head -c 100000 "$TRAIN_TEXT" > "$OUT/train.txt"; TRAIN_TEXT=$OUT/train.txt
fi
mkdir -p "$OUT"
source recipes/lib/lukv_curve.sh
lukv=()
[ -z "$LUKV" ] || lukv_curve "$CURVE_DIR" -m "$MODEL" --dtype float32 -f "$TRAIN_TEXT" -c "$LUKV_CONTEXT" --windows "$LUKV_WINDOWS" \
    --lukv-press "$LUKV" -t "$THREADS"
# The basis is the recipe's own (kvc-calibrate, about 2 minutes on Gemma); it is not committed.
BASES="$OUT/bases.safetensors"
lowrank=()
for rank in $LOWRANK_RANKS; do lowrank+=(--lowrank "$BASES:ranks=$rank"); done
for share in $LOWRANK_SHARES; do lowrank+=(--lowrank "$BASES:share=$share"); done
retrieval=()
for spec in $RETRIEVAL; do retrieval+=(--retrieval "$spec"); done
typed=()
if [ -n "$TYPED" ]; then
  typed=(--typed-cache "${TYPED// /,}")
  [ -z "$TYPED_PRESS" ] || typed+=(--typed-cache-press "$TYPED_PRESS")
fi
if { [ ${#lowrank[@]} -gt 0 ] || [ -n "$GATES" ]; } && [ ! -f "$BASES" ]; then
  "$BIN/kvc-calibrate" -m "$MODEL" --dtype float32 -t "$THREADS" -f "$TRAIN_TEXT" --tokens "$CALIBRATION_TOKENS" \
    -c 512 -o "$BASES" --json > "$OUT/calibrate.json"
fi
if [ -n "$GATES" ]; then
  source recipes/lib/gate_training.sh
  # Each gate set trains once (an interrupted training continues from its checkpoint); the taus are
  # chosen once, in OUT/gates.tau.tsv (remove it after retraining).
  gate_sets=()
  for set in $GATES; do
    gates="$OUT/gates.${set%%:*}.${set#*:}"
    train_gate_set "$gates" "$BIN/kvc-train" -m "$MODEL" --dtype float32 -t "$THREADS" --bases "$BASES" -f "$TRAIN_TEXT" \
      --loss "${set%%:*}" --alpha "${set#*:}" --steps "$TRAIN_STEPS" -c "$TRAIN_CTX" --batch "$TRAIN_BATCH" --lr 0.02 \
      --eval-every 25 --eval-windows 4
    gate_sets+=("$set=$gates.safetensors")
  done
  if [ ! -s "$OUT/gates.tau.tsv" ]; then
    python3 recipes/lib/matched_memory.py --rate tau --bin "$BIN" --model "$MODEL" --text "$TRAIN_TEXT" --threads "$THREADS" \
      --bisect "$BISECT" --shares $GATE_SHARES --gates "${gate_sets[@]}" > "$OUT/gates.tau.tsv.part"
    mv "$OUT/gates.tau.tsv.part" "$OUT/gates.tau.tsv"
  fi
  while IFS=$'\t' read -r _ spec; do lowrank+=(--lowrank "$spec"); done < "$OUT/gates.tau.tsv"
fi
# KL and perplexity on the longest essay: each 2,048-token window's first half compressed, its second
# half fed 64 tokens at a time (kl) or one (kl_retrieval) and scored. Cells run one by one.
kl_args=(--tasks kl -f "$KL_TEXT" -c "$KL_WINDOW" --max-windows 4)
source recipes/lib/committed_results.sh
source recipes/lib/committed_settings.sh  # dynamickv and kvcompose* run the settings of the committed results
for task in $TASKS; do
  unpack_results "$OUT/$task"
  if [ "$task" = kl ]; then
    args=("${kl_args[@]}" --chunk 64)
  elif [ "$task" = needle ]; then
    # 50 needles per cell: SAMPLES/5 at each of five depths.
    per_depth=$(( (SAMPLES + 4) / 5 ))
    args=(--tasks needle --haystack data/text/pg_essays --needle-lengths "$LENGTH" --needle-depths 0,0.25,0.5,0.75,1
          --samples "$per_depth")
  else
    # RULER's answers are one 7-digit number after the answer prefix: 24 new tokens hold it.
    args=(--tasks "$task" --task-lengths "$LENGTH" --samples "$SAMPLES" --ruler-new-tokens 24)
  fi
  common=(-m "$MODEL" --dtype float32 --ratios "$RATIOS" "${args[@]}" --query "$QUERY" --seed 0 -t "$THREADS" --out-dir "$OUT/$task")
  rows=("${retrieval[@]}")
  [ "$task" != kl ] || rows=()
  if [ "$task" = kl_retrieval ]; then
    common=(-m "$MODEL" --dtype float32 "${kl_args[@]}" --chunk 1 --seed 0 -t "$THREADS" --out-dir "$OUT/$task")
    "$BIN/kvc-eval" sweep "${common[@]}" --methods none "${retrieval[@]}" --json >> "$OUT/$task.runs.jsonl"
    continue
  fi
  # Each invocation appends its summary (cells run and reused, prefill and decode seconds) to OUT/<task>.runs.jsonl.
  # The presses that size themselves, the paper settings and LU-KV join the same invocation: one prefill per
  # sample serves them all (and one more the presses scoring a repeated context).
  methods="$METHODS${SIZED:+,$SIZED}${PAPER:+,$PAPER}"
  [ ${#lukv[@]} -eq 0 ] || methods="$methods,lukv"
  "$BIN/kvc-eval" sweep "${common[@]}" --methods "$methods" "${COMMITTED_METHOD_SPECS[@]}" "${lukv[@]}" "${lowrank[@]}" \
    "${rows[@]}" "${typed[@]}" --json >> "$OUT/$task.runs.jsonl"
  if [ ${#lowrank[@]} -gt 0 ] && [ -n "$LOWRANK_PRESS" ]; then
    # The same folder: the cells above are reused, the press storing its kept entries low-rank is added.
    "$BIN/kvc-eval" sweep "${common[@]}" --methods none "${lowrank[@]:0:2}" --lowrank-press "$LOWRANK_PRESS" \
      --json >> "$OUT/$task.runs.jsonl"
  fi
done
# The table and plot cover every task OUT holds, whichever TASKS this invocation ran.
python3 scripts/leaderboard_table.py "$OUT" needle niah_single_2 niah_multikey_1 kl kl_retrieval | tee "$OUT/leaderboard.md"
for task in $TASKS; do pack_results "$OUT/$task"; done
