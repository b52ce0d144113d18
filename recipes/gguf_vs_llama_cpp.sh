#!/usr/bin/env bash
# kvc next to llama.cpp on the same GGUF files, tokens, threads and machine: Gemma 3 270M Q4_K_M and
# SmolLM2-135M-Instruct Q4_1 (scripts/setup.sh installs both), kvc with the weights in their blocks (its
# default for a GGUF) and its default f16 cache, llama.cpp with its default f16 cache.
#   1. speed, KVC_REPEATS rounds (default 3), each round running kvc then llama.cpp, medians reported:
#      prefill of 512 tokens (kvc-bench; llama-bench -p 512), decode after 512 and 4096 tokens of
#      context (kvc-bench --contexts; llama-bench -n 32 -d, the faster of -fa off / -fa on), kvc's share
#      of its read-bandwidth bound (at the bandwidth measured at its start, and at the bandwidth measured
#      right before the decode run), and kvc's own f32 cache beside its default (the KV default's cost);
#   2. the headline: SmolLM2 at 8K of context (8064 tokens), kvc with SnapKV at ratio 0.9 against
#      llama.cpp uncompressed (kvc-bench --presses none,snapkv; llama-bench -d 8064), same rounds, and
#      SnapKV's needle accuracy at that length beside kvc's uncompressed one (kvc-eval needle with an
#      instruction-style needle and question, depths 0/0.5/1, 2 samples each);
#   3. peak RSS of a 512-token prompt and 32 generated tokens (kvc-generate; llama-completion -c 1024);
#   4. perplexity with llama-perplexity's protocol (windows of 512, second half scored) on WikiText-2
#      test: kvc on blocks, kvc with the blocks dequantized to float32 at load, llama-perplexity; and the
#      f16 cache's KL against kvc's f32 cache (kvc-eval kl, windows of 2048).
# llama.cpp comes from scripts/build_llama_cpp.sh (built on first use, about 20 min on 2 cores).
# Writes data/results/gguf/vs_llama_cpp.{json,md}.
#   recipes/gguf_vs_llama_cpp.sh                       # 3 rounds, 60 perplexity windows, 2 threads
#   KVC_REPEATS=5 KVC_PPL_WINDOWS=0 recipes/gguf_vs_llama_cpp.sh   # 5 rounds, every window
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
THREADS=${KVC_THREADS:-2}
REPEATS=${KVC_REPEATS:-3}
WINDOWS=${KVC_PPL_WINDOWS:-60}
KL_WINDOWS=${KVC_KL_WINDOWS:-4}
MODELS=${KVC_MODELS:-"gemma3-270m smollm2-135m"}
PREFILL=512
CONTEXTS="512 4096"
DECODE=32
HEADLINE=8064
NEEDLE_SAMPLES=2
OUT=data/results/gguf
# KVC_SMOKE=1 (the README test suite): kvc's side at small sizes into a scratch folder; llama.cpp's side
# only if it is already built (the suite does not build it).
if [ -n "${KVC_SMOKE:-}" ]; then
  REPEATS=1; WINDOWS=1; KL_WINDOWS=1; PREFILL=64; CONTEXTS="64"; DECODE=4; HEADLINE=256; NEEDLE_SAMPLES=1
  MODELS=${KVC_MODELS:-smollm2-135m}; OUT=$(mktemp -d)
fi
if [ -n "${KVC_SMOKE:-}" ] && [ ! -x .llama.cpp/build/bin/llama-bench ]; then LLAMA=""; else LLAMA=$(scripts/build_llama_cpp.sh); fi
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
text=data/text/wikitext2/wiki.test.raw
contexts_csv=$(echo $CONTEXTS | tr ' ' ',')
rss() { /usr/bin/time -f "%M" -o "$1" "${@:2}" > /dev/null 2>&1; }

for name in $MODELS; do
  gguf=$(scripts/model_path.sh "$name")
  m="$work/$name"
  mkdir -p "$m"
  for r in $(seq 1 "$REPEATS"); do
    echo "gguf_vs_llama_cpp: $name, round $r of $REPEATS" >&2
    # 1. Speed: kvc (default f16 cache, then f32), then llama.cpp.
    "$BIN/kvc-bench" -m "$gguf" --contexts "$PREFILL,$contexts_csv" --decode-tokens $DECODE --decode-repeats 1 \
      -t "$THREADS" --json > "$m/kvc_bench_$r.json" 2> "$m/kvc_bench_$r.err"
    "$BIN/kvc-bench" -m "$gguf" --contexts "$contexts_csv" --decode-tokens $DECODE --decode-repeats 1 \
      --cache-type-k f32 --cache-type-v f32 -t "$THREADS" --json > "$m/kvc_bench_f32_$r.json" 2> /dev/null
    if [ -n "$LLAMA" ]; then
      "$LLAMA/llama-bench" -m "$gguf" -p $PREFILL -n 0 -fa off,on -t "$THREADS" -r 1 -o json \
        > "$m/llama_pp_$r.json" 2> /dev/null
      "$LLAMA/llama-bench" -m "$gguf" -p 0 -n $DECODE -d "$contexts_csv" -fa off,on -t "$THREADS" -r 1 -o json \
        > "$m/llama_tg_$r.json" 2> /dev/null
    fi
    # 2. The headline, on SmolLM2 only.
    if [ "$name" = smollm2-135m ]; then
      "$BIN/kvc-bench" -m "$gguf" --presses none,snapkv --ratio 0.9 --contexts $HEADLINE --decode-tokens $DECODE \
        -t "$THREADS" --json > "$m/kvc_headline_$r.json" 2> /dev/null
      if [ -n "$LLAMA" ]; then
        "$LLAMA/llama-bench" -m "$gguf" -p 0 -n $DECODE -d $HEADLINE -fa off,on -t "$THREADS" -r 1 -o json \
          > "$m/llama_headline_$r.json" 2> /dev/null
      fi
    fi
  done
  if [ "$name" = smollm2-135m ]; then
    for press in none snapkv; do
      "$BIN/kvc-eval" needle -m "$gguf" --haystack data/text/pg_essays --lengths $HEADLINE --depths 0,0.5,1 \
        --samples $NEEDLE_SAMPLES --seed 0 --press $press --ratio $([ $press = none ] && echo 0 || echo 0.9) \
        --needle-template "The special magic number mentioned in this document is {number}." \
        --question-template "What is the special magic number mentioned in the document above? The special magic number is" \
        -t "$THREADS" --json > "$m/needle_$press.json" 2> "$m/needle_$press.err"
    done
  fi
  # 3. Peak RSS.
  rss "$m/kvc_rss.txt" "$BIN/kvc-generate" -m "$gguf" -f "$text" --prompt-tokens $PREFILL -n $DECODE --ignore-eos -q -t "$THREADS"
  if [ -n "$LLAMA" ]; then
    head -c 3000 "$text" > "$m/prompt.txt"
    rss "$m/llama_rss.txt" "$LLAMA/llama-completion" -m "$gguf" -f "$m/prompt.txt" -n $DECODE -c 1024 -t "$THREADS" \
      -no-cnv --no-display-prompt --ignore-eos
  fi
  # 4. Perplexity and the f16 cache's KL.
  for dtype in auto float32; do
    "$BIN/kvc-eval" ppl -m "$gguf" -f "$text" -c 512 --max-windows "$WINDOWS" --protocol llama.cpp --dtype $dtype \
      -t "$THREADS" --json > "$m/kvc_ppl_$dtype.json"
  done
  if [ -n "$LLAMA" ]; then
    chunks=()
    [ "$WINDOWS" -gt 0 ] && chunks=(--chunks "$WINDOWS")
    "$LLAMA/llama-perplexity" -m "$gguf" -f "$text" -c 512 -b 512 "${chunks[@]}" -t "$THREADS" > "$m/llama_ppl.txt" 2>&1
  fi
  "$BIN/kvc-eval" kl -m "$gguf" -f "$text" -c $((PREFILL * 4)) --max-windows "$KL_WINDOWS" -t "$THREADS" --json \
    > "$m/kvc_kl_f16.json" 2> /dev/null
  # The same with the blocks dequantized: the cache's own effect, without the 8-bit rounding of the
  # block kernels' input, which any change upstream of a product reshuffles.
  "$BIN/kvc-eval" kl -m "$gguf" -f "$text" -c $((PREFILL * 4)) --max-windows "$KL_WINDOWS" -t "$THREADS" --json \
    --dtype float32 --cache-type-k f16 --cache-type-v f16 > "$m/kvc_kl_f16_float32.json" 2> /dev/null
done

python3 - "$work" "$OUT" "$THREADS" "$REPEATS" "$WINDOWS" "$HEADLINE" "$PREFILL" "$CONTEXTS" $MODELS <<'PY'
import json, pathlib, re, statistics, sys
work, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
threads, repeats, windows, headline, prefill = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
contexts = [int(c) for c in sys.argv[8].split()]
models = sys.argv[9:]
med = statistics.median
result = {"threads": threads, "repeats": repeats, "ppl_windows": windows, "models": {}}
lines = [f"{threads} threads; medians of {repeats} rounds, each running kvc then llama.cpp; ratios kvc / llama.cpp "
         "(of the medians, and in brackets the median of the rounds' own ratios).", "",
         "| model | what | kvc | llama.cpp | ratio | note |", "|---|---|---|---|---|---|"]

def load(p):
    return json.loads(p.read_text()) if p.exists() and p.stat().st_size else None

def llama_rows(path, kind):
    rows = load(path) or []
    return [r for r in rows if (r["n_prompt"] > 0 and r["n_gen"] == 0) == (kind == "pp")]

def best_fa(rows, depth=None):
    # The faster of -fa off and -fa on (llama-bench's flash_attn field).
    rows = [r for r in rows if depth is None or r.get("n_depth", 0) == depth]
    return max((r["avg_ts"] for r in rows), default=None)

for name in models:
    m = work / name
    res = {"rounds": []}
    for r in range(1, repeats + 1):
        kb, kf = load(m / f"kvc_bench_{r}.json"), load(m / f"kvc_bench_f32_{r}.json")
        runs = {x["context"]: x for x in kb["runs"]}
        runs_f32 = {x["context"]: x for x in kf["runs"]}
        rd = {"kvc_prefill": runs[prefill]["prefill_tokens_per_second"],
              "kvc_decode": {c: runs[c]["decode_tokens_per_second"] for c in contexts},
              "kvc_decode_f32_cache": {c: runs_f32[c]["decode_tokens_per_second"] for c in contexts},
              "kvc_fraction_of_read_bound": {c: runs[c]["decode_fraction_of_read_bound"] for c in contexts},
              # The bound at the bandwidth measured right before the decode run (kvc-bench's %rd-beside).
              "kvc_fraction_of_read_bound_beside": {c: runs[c].get("decode_fraction_of_read_bound_beside")
                                                    for c in contexts},
              "kvc_kv_bytes": {c: runs[c]["kv_payload_bytes"] for c in contexts},
              "read_bandwidth_gbs": kb["read_bandwidth_gbs"], "weight_bytes": kb["weight_bytes_per_decode_step"],
              "weight_format": kb.get("weight_format")}
        pp, tg = llama_rows(m / f"llama_pp_{r}.json", "pp"), llama_rows(m / f"llama_tg_{r}.json", "tg")
        if pp:
            rd["llama_prefill"] = best_fa(pp)
            rd["llama_prefill_by_fa"] = {str(x["flash_attn"]): x["avg_ts"] for x in pp}
            rd["llama_decode"] = {c: best_fa(tg, c) for c in contexts}
            rd["llama_build"] = pp[0].get("build_commit")
        kh = load(m / f"kvc_headline_{r}.json")
        if kh:
            hr = {x["press"]: x for x in kh["runs"]}
            rd["headline"] = {"kvc_none": hr["none"]["decode_tokens_per_second"],
                              "kvc_snapkv": hr["snapkv"]["decode_tokens_per_second"],
                              "kvc_snapkv_step_bytes": hr["snapkv"]["step_read_bytes"],
                              "kvc_none_step_bytes": hr["none"]["step_read_bytes"]}
            lh = llama_rows(m / f"llama_headline_{r}.json", "tg")
            if lh:
                rd["headline"]["llama"] = best_fa(lh, headline)
        res["rounds"].append(rd)
    rounds = res["rounds"]
    fmt = lambda v, d=1: "—" if v is None else f"{v:,.{d}f}"

    def beside(rounds, c):
        values = [x["kvc_fraction_of_read_bound_beside"][c] for x in rounds]
        return "—" if None in values else f"{100 * med(values):.0f}%"

    def row(what, kvc_vals, llama_vals, note=""):
        k = med(kvc_vals)
        if llama_vals and all(v is not None for v in llama_vals):
            l = med(llama_vals)
            own = med([a / b for a, b in zip(kvc_vals, llama_vals)])
            lines.append(f"| {name} | {what} | {fmt(k)} | {fmt(l)} | {k / l:.2f} ({own:.2f}) | {note} |")
            return {"kvc": k, "llama_cpp": l, "ratio": k / l, "median_round_ratio": own}
        lines.append(f"| {name} | {what} | {fmt(k)} | — | | {note} |")
        return {"kvc": k}

    have_llama = "llama_prefill" in rounds[0]
    res["prefill"] = row(f"prefill tok/s, {prefill} tokens", [x["kvc_prefill"] for x in rounds],
                         [x["llama_prefill"] for x in rounds] if have_llama else None)
    res["decode"] = {}
    for c in contexts:
        res["decode"][c] = row(f"decode tok/s after {c} tokens", [x["kvc_decode"][c] for x in rounds],
                               [x["llama_decode"][c] for x in rounds] if have_llama else None,
                               f"kvc at {100 * med([x['kvc_fraction_of_read_bound'][c] for x in rounds]):.0f}% of its "
                               f"read bound ({beside(rounds, c)} at the bandwidth measured beside each run); "
                               f"kvc with an f32 cache {med([x['kvc_decode_f32_cache'][c] for x in rounds]):.1f} tok/s")
    if "headline" in rounds[0]:
        h = [x["headline"] for x in rounds]
        res["headline"] = row(f"decode tok/s after {headline} tokens, kvc SnapKV 0.9 vs llama.cpp uncompressed",
                              [x["kvc_snapkv"] for x in h], [x.get("llama") for x in h] if "llama" in h[0] else None,
                              f"kvc uncompressed {med([x['kvc_none'] for x in h]):.1f} tok/s; a step reads "
                              f"{med([x['kvc_snapkv_step_bytes'] for x in h]) / 1e6:.0f} MB with SnapKV, "
                              f"{med([x['kvc_none_step_bytes'] for x in h]) / 1e6:.0f} MB without")
        needles = {p: load(m / f"needle_{p}.json") for p in ("none", "snapkv")}
        if all(needles.values()):
            res["needle"] = {p: {"accuracy": n["accuracy"], "samples": sum(len(c["samples"]) for c in n["cells"])}
                             for p, n in needles.items()}
            lines.append(f"| {name} | needle accuracy at {headline} tokens (instruction-style needle, depths 0/0.5/1) | SnapKV 0.9: "
                         f"{res['needle']['snapkv']['accuracy']:.2f}, uncompressed: {res['needle']['none']['accuracy']:.2f} "
                         f"| | | {res['needle']['snapkv']['samples']} samples each |")
    k_rss = int((m / "kvc_rss.txt").read_text().split()[-1]) * 1024
    l_rss = int((m / "llama_rss.txt").read_text().split()[-1]) * 1024 if (m / "llama_rss.txt").exists() else None
    res["peak_rss_bytes"] = {"kvc": k_rss, "llama_cpp": l_rss}
    lines.append(f"| {name} | peak RSS, {prefill}-token prompt + 32 generated, MB | {k_rss / 1e6:.0f} | "
                 f"{fmt(l_rss / 1e6 if l_rss else None, 0)} | | weights {rounds[0]['weight_bytes'] / 1e6:.0f} MB "
                 f"({rounds[0]['weight_format']}) |")
    pk = {d: load(m / f"kvc_ppl_{d}.json") for d in ("auto", "float32")}
    res["perplexity"] = {"kvc_blocks": pk["auto"]["ppl"], "kvc_float32": pk["float32"]["ppl"],
                         "tokens_scored": pk["auto"]["tokens_scored"], "windows": pk["auto"]["windows"]}
    llama_ppl = None
    if (m / "llama_ppl.txt").exists():
        final = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", (m / "llama_ppl.txt").read_text(errors="replace"))
        llama_ppl = float(final.group(1)) if final else None
        res["perplexity"]["llama_cpp"] = llama_ppl
        res["perplexity"]["llama_cpp_stderr"] = float(final.group(2)) if final else None
    p = res["perplexity"]
    lines.append(f"| {name} | perplexity, WikiText-2 test, {p['windows']} windows of 512 ({p['tokens_scored']:,} tokens "
                 f"scored) | blocks {p['kvc_blocks']:.4f}, float32 {p['kvc_float32']:.4f} | {fmt(llama_ppl, 4)} | "
                 f"blocks/float32 {p['kvc_blocks'] / p['kvc_float32']:.4f}"
                 + (f", blocks/llama.cpp {p['kvc_blocks'] / llama_ppl:.4f}" if llama_ppl else "") + " | |")
    kl, kl32 = load(m / "kvc_kl_f16.json"), load(m / "kvc_kl_f16_float32.json")
    if kl32:
        res["kv_f16_kl_float32_weights"] = {k: kl32[k] for k in ("kl", "max_kl", "top1_agreement")}
        lines.append(f"| {name} | f16 cache against an f32 cache, weights dequantized to float32, windows of "
                     f"{prefill * 4} | mean KL {kl32['kl']:.2e} nats (max {kl32['max_kl']:.2e}), top-1 agreement "
                     f"{kl32['top1_agreement']:.4f} | | | |")
    if kl:
        res["kv_f16_kl"] = {k: kl[k] for k in ("kl", "max_kl", "top1_agreement")}
        lines.append(f"| {name} | f16 cache against kvc's f32 cache (weights in blocks), windows of {prefill * 4} | mean KL "
                     f"{kl['kl']:.2e} nats (max {kl['max_kl']:.2e}), top-1 agreement {kl['top1_agreement']:.4f} | | | |")
    result["models"][name] = res
(out / "vs_llama_cpp.json").write_text(json.dumps(result, indent=1) + "\n")
(out / "vs_llama_cpp.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
