# Sourced by the recipes that train gate sets they keep between runs.
# train_gate_set PREFIX KVC-TRAIN-COMMAND...: runs the kvc-train command (every flag but --checkpoint,
# --resume, -o and --json) into PREFIX.safetensors with its report in PREFIX.json, unless that report
# says the training finished; an interrupted training continues from PREFIX.ckpt. If kvc-train stops
# early (Ctrl-C), the recipe stops with one line saying how to continue.
train_gate_set() {
  local prefix=$1
  shift
  grep -q '"finished":true' "$prefix.json" 2> /dev/null && return 0
  local resume=()
  [ -s "$prefix.ckpt" ] && resume=(--resume)
  "$@" --checkpoint "$prefix.ckpt" "${resume[@]}" -o "$prefix.safetensors" --json > "$prefix.json.part"
  mv "$prefix.json.part" "$prefix.json"
  grep -q '"finished":true' "$prefix.json" ||
    { echo "kvc-train stopped early: run the recipe again to continue $prefix" >&2; exit 130; }
}
