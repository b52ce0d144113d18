# Sourced by the leaderboard recipes: LU-KV's budget curve for a model, made once.
#   lukv_curve DIR ARGS...   ARGS are kvc-profile's (model, text, --ctx-size, --windows, --lukv-press, threads)
# writes DIR/lukv.safetensors and DIR/lukv.csv with "$BIN/kvc-profile" unless DIR/lukv.safetensors exists, and
# sets the array `lukv` to the sweep flags that run the bare row name lukv with that curve.
lukv_curve() {
  local dir=$1 profile
  shift
  if [ ! -s "$dir/lukv.safetensors" ]; then
    profile=$(mktemp -d)
    "$BIN/kvc-profile" "$@" --no-plot --out-dir "$profile/out" --json > /dev/null
    mv "$profile/out/lukv.csv" "$dir/lukv.csv"
    mv "$profile/out/lukv.safetensors" "$dir/lukv.safetensors"
    rm -r "$profile"
  fi
  lukv=(--method-spec "lukv=lukv:curve=$dir/lukv.safetensors")
}
