# Sourced by the distributed recipes. one_process_vs_two_ranks TOOL PORT WORK ARGS... runs TOOL ARGS as
# one process (WORK/one.safetensors, WORK/one.json), then as two ranks over c10d/Gloo on 127.0.0.1
# (WORK/two.safetensors, WORK/rank0.json, WORK/rank1.json), and sets T0, T1, T2 (date +%s.%N): the start,
# the end of the one process, the end of the two ranks.
one_process_vs_two_ranks() {
  local tool=$1 port=$2 work=$3
  shift 3
  T0=$(date +%s.%N)
  "$tool" "$@" -o "$work/one.safetensors" > "$work/one.json"
  T1=$(date +%s.%N)
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$tool" "$@" \
      -o "$work/two.safetensors" > "$work/rank$r.json" &
  done
  wait
  T2=$(date +%s.%N)
}
