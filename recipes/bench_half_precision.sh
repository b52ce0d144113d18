#!/usr/bin/env bash
# 16-bit weights and caches on CPU, same run, same machine:
#  1. kvc-bench on the 134M random Llama stored in bf16, against the same weights widened to fp32 at
#     load (--dtype float32): decode and prefill at 512.
#  2. The same model converted to an F16 GGUF by llama.cpp's own converter, run by kvc (f16 weights,
#     -ctk f16 -ctv f16) and by llama-bench (its defaults: f16 KV), same threads, at 512, 2K and 8K.
# Writes data/results/bench/half_precision.{json,md}. Run it on an otherwise idle machine.
#
# Needs: a tokenizer.model of 32000 tokens for the converter (KVC_LLAMA2_TOKENIZER, default
# ../shared/models/llama2-tokenizer.model; without it step 2 is skipped) and a Python with torch,
# sentencepiece and gguf for convert_hf_to_gguf.py (KVC_REF_PYTHON, default /tmp/venv-ref/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
THREADS=${KVC_THREADS:-2}
CONTEXTS=${KVC_CONTEXTS:-512,2048,8192}
DECODE=32
CKPT=${KVC_BENCH_BF16_CKPT:-/tmp/kvc-llama-125m-bf16}
TOKENIZER=${KVC_LLAMA2_TOKENIZER:-../shared/models/llama2-tokenizer.model}
PY=${KVC_REF_PYTHON:-/tmp/venv-ref/bin/python}
OUT=data/results/bench
if [ -n "${KVC_SMOKE:-}" ]; then CKPT=/tmp/kvc-smoke-bf16; CONTEXTS=128; DECODE=4; OUT=$(mktemp -d); fi
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -f "$CKPT/model.safetensors" ]; then
  tok=()
  [ -f "$TOKENIZER" ] && tok=(--tokenizer "$TOKENIZER")
  if [ -n "${KVC_SMOKE:-}" ]; then
    "$BIN/kvc-make-checkpoint" --hidden 128 --layers 2 --heads 4 --kv-heads 2 --vocab 32000 --context 1024 \
      --dtype bfloat16 "${tok[@]}" --out-dir "$CKPT"
  else
    "$BIN/kvc-make-checkpoint" --preset llama-125m --context 16384 --dtype bfloat16 "${tok[@]}" --out-dir "$CKPT"
  fi
fi

# 1. bf16 against fp32: the same weights, one widened at load.
FIRST=${CONTEXTS%%,*}
"$BIN/kvc-bench" -m "$CKPT" --dtype float32 --contexts "$FIRST" --decode-tokens $DECODE --prefill-repeats 3 -t "$THREADS" --json \
  > "$work/fp32.json"
"$BIN/kvc-bench" -m "$CKPT" --contexts "$FIRST" --decode-tokens $DECODE --prefill-repeats 3 -t "$THREADS" --json \
  > "$work/bf16.json"

# 2. F16 GGUF, kvc and llama.cpp.
LLAMA=""
if [ -f "$CKPT/tokenizer.model" ] && [ -x "$PY" ] && { [ -z "${KVC_SMOKE:-}" ] || [ -x .llama.cpp/build/bin/llama-bench ]; }; then
  LLAMA=$(scripts/build_llama_cpp.sh)
  SRC=$(ls -d .llama.cpp/llama_cpp_python-*/vendor/llama.cpp | head -n 1)
  GGUF="$CKPT/model-f16.gguf"
  [ -f "$GGUF" ] || "$PY" "$SRC/convert_hf_to_gguf.py" "$CKPT" --outtype f16 --outfile "$GGUF" > "$work/convert.log" 2>&1
  "$BIN/kvc-bench" -m "$GGUF" -ctk f16 -ctv f16 --contexts "$CONTEXTS" --decode-tokens $DECODE --prefill-repeats 3 -t "$THREADS" --json \
    > "$work/kvc_gguf.json"
  "$LLAMA/llama-bench" -m "$GGUF" -p "$CONTEXTS" -n 0 -t "$THREADS" -r 3 -o json > "$work/llama_pp.json" 2>/dev/null
  "$LLAMA/llama-bench" -m "$GGUF" -p 0 -n $DECODE -d "$CONTEXTS" -t "$THREADS" -r 3 -o json \
    > "$work/llama_tg.json" 2>/dev/null
fi

python3 - "$work" "$OUT" "$THREADS" <<'PY'
import json, pathlib, sys
work, out, threads = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
load = lambda name: json.loads((work / name).read_text())
fp32, bf16 = load("fp32.json"), load("bf16.json")
a, b = fp32["runs"][0], bf16["runs"][0]
result = {"threads": threads, "bf16_vs_fp32": {
    "context": a["context"],
    "fp32": {"prefill_tps": a["prefill_tokens_per_second"], "decode_tps": a["decode_tokens_per_second"],
             "weight_bytes_per_decode_step": fp32["weight_bytes_per_decode_step"]},
    "bf16": {"prefill_tps": b["prefill_tokens_per_second"], "decode_tps": b["decode_tokens_per_second"],
             "weight_bytes_per_decode_step": bf16["weight_bytes_per_decode_step"]},
    "decode_ratio": b["decode_tokens_per_second"] / a["decode_tokens_per_second"],
    "prefill_ratio": b["prefill_tokens_per_second"] / a["prefill_tokens_per_second"]}}
r = result["bf16_vs_fp32"]
lines = [f"134M Llama, {threads} threads, prompt {r['context']}, {fp32['decode_tokens']} decode steps:", "",
         "| weights | MB read per decode step | prefill tok/s | decode tok/s |", "|---|---|---|---|",
         f"| fp32 (bf16 file widened at load, `--dtype float32`) | {r['fp32']['weight_bytes_per_decode_step'] / 1e6:.0f} "
         f"| {r['fp32']['prefill_tps']:.0f} | {r['fp32']['decode_tps']:.1f} |",
         f"| bf16 (as stored) | {r['bf16']['weight_bytes_per_decode_step'] / 1e6:.0f} | {r['bf16']['prefill_tps']:.0f} "
         f"({r['prefill_ratio']:.2f}×) | {r['bf16']['decode_tps']:.1f} ({r['decode_ratio']:.2f}×) |", ""]
if (work / "kvc_gguf.json").exists():
    kg = load("kvc_gguf.json")
    pp = {x["n_prompt"]: x for x in load("llama_pp.json") if x["n_prompt"] > 0}
    tg = {x["n_depth"]: x for x in load("llama_tg.json") if x["n_gen"] > 0}
    rows = []
    lines += ["Same model as an F16 GGUF (llama.cpp's convert_hf_to_gguf.py), f16 KV cache on both sides:", "",
              "| context | kvc prefill tok/s | llama.cpp | ratio | kvc decode tok/s | llama.cpp | ratio | kvc KV MB |",
              "|---|---|---|---|---|---|---|---|"]
    for run in kg["runs"]:
        c = run["context"]
        row = {"context": c, "kvc_prefill_tps": run["prefill_tokens_per_second"],
               "kvc_decode_tps": run["decode_tokens_per_second"], "kvc_kv_bytes": run.get("kv_payload_bytes"),
               "llama_cpp_prefill_tps": pp[c]["avg_ts"], "llama_cpp_decode_tps": tg[c]["avg_ts"]}
        row["prefill_ratio"] = row["kvc_prefill_tps"] / row["llama_cpp_prefill_tps"]
        row["decode_ratio"] = row["kvc_decode_tps"] / row["llama_cpp_decode_tps"]
        rows.append(row)
        kv = f"{row['kvc_kv_bytes'] / 1e6:.1f}" if row["kvc_kv_bytes"] else "—"
        lines.append(f"| {c} | {row['kvc_prefill_tps']:.0f} | {row['llama_cpp_prefill_tps']:.0f} | {row['prefill_ratio']:.2f} "
                     f"| {row['kvc_decode_tps']:.1f} | {row['llama_cpp_decode_tps']:.1f} | {row['decode_ratio']:.2f} | {kv} |")
    result["f16_gguf_vs_llama_cpp"] = {"llama_cpp_build": next(iter(pp.values())).get("build_commit"), "runs": rows}
(out / "half_precision.json").write_text(json.dumps(result, indent=1) + "\n")
(out / "half_precision.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
