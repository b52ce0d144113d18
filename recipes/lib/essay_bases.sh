# Sourced by the recipes that calibrate a basis on the essays and keep it in a work folder, from the
# repository root. essay_bases WORK BIN MODEL TOKENS THREADS [BYTES] splits the essays (of their first
# BYTES, when given) into WORK/train.txt and WORK/eval.txt as split_essays does, calibrates MODEL on
# train.txt (TOKENS tokens, windows of 512) unless WORK already holds that basis, and prints its name:
# WORK/NAME.safetensors, with kvc-calibrate's report in WORK/NAME.json. The name holds TOKENS and the
# training text's checksum, so a WORK folder never mixes runs of different sizes or texts.
. recipes/lib/essay_split.sh
essay_bases() {
  local work=$1 bin=$2 model=$3 tokens=$4 threads=$5 name
  split_essays "$work/train.txt" "$work/eval.txt" ${6:+"$6"}
  name=bases.t$tokens.$(cksum < "$work/train.txt" | cut -d' ' -f1)
  if [ ! -s "$work/$name.json" ]; then
    "$bin/kvc-calibrate" -m "$model" --dtype float32 -t "$threads" -f "$work/train.txt" --tokens "$tokens" -c 512 \
      -o "$work/$name.safetensors" --json > "$work/$name.json.part"
    mv "$work/$name.json.part" "$work/$name.json"
  fi
  echo "$name"
}
