#!/usr/bin/env bash
# Starts N ranks of one kvc command on this machine, as torchrun would: each gets RANK, LOCAL_RANK,
# WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Exits with the first failing rank's status (after stopping
# the others, which would otherwise wait for it until --dist-timeout), or 0 when every rank succeeded.
# Ctrl-C or SIGTERM is passed on to every rank, so kvc-train stops them all after the same step.
#
#   scripts/ranks.sh 2 build/bin/kvc-calibrate -m data/models/stories260K \
#       -f data/text/tinystories/tinystories_excerpt_30k.txt --tokens 20000 -o bases.safetensors
#   MASTER_PORT=29600 scripts/ranks.sh 4 build/bin/kvc-eval sweep ... --shard auto
set -u
if [ $# -lt 2 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/ranks.sh N COMMAND [ARGS...]   (N >= 1 ranks; MASTER_PORT picks the port, default 29500)" >&2
  exit 2
fi
world=$1
shift
if ! command -v "$1" > /dev/null; then
  echo "scripts/ranks.sh: '$1' is not a command (build first: cmake --build build, then use build/bin/...)" >&2
  exit 127
fi
export WORLD_SIZE=$world MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=${MASTER_PORT:-29500}

pids=()
for ((r = 0; r < world; ++r)); do
  RANK=$r LOCAL_RANK=$r "$@" &
  pids+=($!)
done

stop_all() { kill -TERM "${pids[@]}" 2> /dev/null; }
trap 'stop_all' INT TERM

# Poll rather than `wait -n`: bash loses the status of a rank that exits before `wait -n` is reached.
status=0
remaining=$world
while ((remaining > 0)); do
  for i in "${!pids[@]}"; do
    pid=${pids[$i]}
    [ -z "$pid" ] && continue
    kill -0 "$pid" 2> /dev/null && continue
    wait "$pid"
    rc=$?
    pids[$i]=""
    remaining=$((remaining - 1))
    if ((rc != 0 && status == 0)); then
      status=$rc
      echo "scripts/ranks.sh: rank $i exited with status $rc; stopping the other ranks" >&2
      live=()
      for p in "${pids[@]}"; do [ -n "$p" ] && live+=("$p"); done
      ((${#live[@]})) && kill -TERM "${live[@]}" 2> /dev/null
    fi
  done
  ((remaining > 0)) && sleep 0.1
done
exit $status
