#!/usr/bin/env bash
# KV cache types at long context, same run, same machine: kvc-bench decode and prefill on the 134M Llama
# as an F16 GGUF with -ctk/-ctv f16, q8_0 and q4_0, next to llama-bench on the same file with the same
# cache types (flash attention on: llama.cpp needs it for a quantized V cache).
# Writes data/results/bench/cache_types.{json,md}. Run it on an otherwise idle machine.
#
# Needs the F16 GGUF that recipes/bench_half_precision.sh converts (KVC_BENCH_GGUF, default
# /tmp/kvc-llama-125m-bf16/model-f16.gguf) and llama.cpp (scripts/build_llama_cpp.sh); without llama.cpp
# only kvc's columns are measured.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
THREADS=${KVC_THREADS:-2}
CONTEXTS=${KVC_CONTEXTS:-2048,8192}
DECODE=32
GGUF=${KVC_BENCH_GGUF:-/tmp/kvc-llama-125m-bf16/model-f16.gguf}
TYPES=(f16 q8_0 q4_0)
OUT=data/results/bench
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
LLAMA=""
[ -x .llama.cpp/build/bin/llama-bench ] && LLAMA=.llama.cpp/build/bin
if [ -n "${KVC_SMOKE:-}" ]; then
  # A small f16 model of head_dim 32, kvc only: checks the recipe end to end in seconds.
  CONTEXTS=128; DECODE=4; OUT=$(mktemp -d); LLAMA=""; GGUF="$work/smoke"
  "$BIN/kvc-make-checkpoint" --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 512 --context 512 \
    --dtype float16 --out-dir "$GGUF" > /dev/null
fi
[ -e "$GGUF" ] || { echo "error: $GGUF not found; run recipes/bench_half_precision.sh first (it converts the model)" >&2; exit 1; }
for t in "${TYPES[@]}"; do
  "$BIN/kvc-bench" -m "$GGUF" -ctk "$t" -ctv "$t" --contexts "$CONTEXTS" --decode-tokens $DECODE --prefill-repeats 2 \
    -t "$THREADS" --json > "$work/kvc_$t.json"
  if [ -n "$LLAMA" ]; then
    "$LLAMA/llama-bench" -m "$GGUF" -ctk "$t" -ctv "$t" -fa 1 -p 0 -n $DECODE -d "$CONTEXTS" -t "$THREADS" -r 2 -o json \
      > "$work/llama_$t.json" 2>/dev/null
  fi
done

python3 - "$work" "$OUT" "$THREADS" "${TYPES[*]}" <<'PY'
import json, pathlib, sys
work, out, threads, types = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
load = lambda name: json.loads((work / name).read_text())
kvc = {t: {r["context"]: r for r in load(f"kvc_{t}.json")["runs"]} for t in types}
llama = {t: {x["n_depth"]: x for x in load(f"llama_{t}.json") if x["n_gen"] > 0}
         for t in types if (work / f"llama_{t}.json").exists()}
rows = []
lines = [f"134M Llama (F16 GGUF), {threads} threads, {load('kvc_f16.json')['decode_tokens']} decode steps after a prompt "
         "of each length; kvc's f16 cache is the reference of the ratios.", "",
         "| context | cache type | kvc KV MB | bytes vs f16 | kvc prefill tok/s | kvc decode tok/s | vs f16 | llama.cpp decode tok/s | kvc / llama.cpp |",
         "|---|---|---|---|---|---|---|---|---|"]
for c in sorted(kvc["f16"]):
    base = kvc["f16"][c]
    for t in types:
        r = kvc[t][c]
        row = {"context": c, "cache_type": t, "kv_payload_bytes": r["kv_payload_bytes"],
               "bytes_vs_f16": r["kv_payload_bytes"] / base["kv_payload_bytes"],
               "prefill_tps": r["prefill_tokens_per_second"], "decode_tps": r["decode_tokens_per_second"],
               "decode_vs_f16": r["decode_tokens_per_second"] / base["decode_tokens_per_second"]}
        peer = llama.get(t, {}).get(c)
        if peer:
            row["llama_cpp_decode_tps"] = peer["avg_ts"]
            row["decode_vs_llama_cpp"] = row["decode_tps"] / peer["avg_ts"]
        rows.append(row)
        lp = f"{row['llama_cpp_decode_tps']:.1f} | {row['decode_vs_llama_cpp']:.2f}" if peer else "— | —"
        lines.append(f"| {c} | {t} | {row['kv_payload_bytes'] / 1e6:.1f} | {row['bytes_vs_f16']:.3f} | {row['prefill_tps']:.0f} "
                     f"| {row['decode_tps']:.1f} | {row['decode_vs_f16']:.2f} | {lp} |")
(out / "cache_types.json").write_text(json.dumps({"threads": threads, "rows": rows}, indent=1) + "\n")
(out / "cache_types.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
