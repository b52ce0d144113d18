#!/usr/bin/env bash
# kvc-calibrate on one process and on two ranks (one thread each, c10d/Gloo over 127.0.0.1) on the same
# windows: wall time of each, the time rank 0 spent waiting for and adding up the sums, and the largest
# difference between the two runs' eigenvalues (relative to the largest one).
# Writes data/results/distributed/calibrate.{json,md}. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
FILES=(data/text/pg_essays/*.txt)
TOKENS=${KVC_TOKENS:-200000}
PORT=${MASTER_PORT:-29531}
OUT=data/results/distributed
if [ -n "${KVC_SMOKE:-}" ]; then TOKENS=4000; OUT=$(mktemp -d); fi
# Measured on kvc-tiny-lm (2.4M parameters, from ../shared: scripts/model_path.sh); the smoke run uses the
# repository's kvc-micro-lm.
if [ -n "${KVC_SMOKE:-}" ]; then MODEL=data/models/kvc-micro-lm; else MODEL=${MODEL:-$(scripts/model_path.sh kvc-tiny-lm)}; fi
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(-m "$MODEL" -f "${FILES[@]}" --tokens "$TOKENS" --ctx-size 256 -t 1 --json)

t0=$(date +%s.%N)
"$BIN/kvc-calibrate" "${args[@]}" -o "$work/one.safetensors" > "$work/one.json"
t1=$(date +%s.%N)
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT "$BIN/kvc-calibrate" "${args[@]}" \
    -o "$work/two.safetensors" > "$work/rank$r.json" &
done
wait
t2=$(date +%s.%N)

python3 - "$work" "$OUT" "$t0" "$t1" "$t2" <<'PY'
import json, pathlib, struct, sys
work, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
t0, t1, t2 = map(float, sys.argv[3:6])
one, two = json.loads((work / "one.json").read_text()), json.loads((work / "rank0.json").read_text())

def tensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F64":
            continue
        a, b = info["data_offsets"]
        out[name] = struct.unpack(f"<{(b - a) // 8}d", data[a:b])
    return out

x, y = tensors(work / "one.safetensors"), tensors(work / "two.safetensors")
worst = max(abs(p - q) / max(abs(v[0]), 1e-300) for k, v in x.items() for p, q in zip(v, y[k]))
result = {"model": "kvc-tiny-lm", "tokens": one["tokens"], "tokens_two_ranks": two["tokens"],
          "seconds_one_process": t1 - t0, "seconds_two_ranks": t2 - t1, "speedup": (t1 - t0) / (t2 - t1),
          "rank0_exchange_seconds": two["exchange_seconds"], "max_eigenvalue_difference_relative": worst}
lines = [f"kvc-calibrate, kvc-tiny-lm, {one['tokens']} tokens in windows of 256, one thread per process "
         "(wall time includes loading the model and tokenizing):", "",
         "| run | wall s | rank 0 waiting for and adding up the sums, s | eigenvalues vs one process (max, relative) |",
         "|---|---|---|---|",
         f"| 1 process | {t1 - t0:.2f} | — | — |",
         f"| 2 ranks (Gloo, 127.0.0.1) | {t2 - t1:.2f} ({result['speedup']:.2f}× faster) | {two['exchange_seconds']:.3f} | {worst:.1e} |"]
(out / "calibrate.json").write_text(json.dumps(result, indent=1) + "\n")
(out / "calibrate.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
