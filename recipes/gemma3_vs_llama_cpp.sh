#!/usr/bin/env bash
# Gemma 3 270M (the Q4_K_M GGUF scripts/setup.sh installs), kvc next to llama.cpp on the same file,
# tokens, threads and machine, in one run:
#   1. perplexity with llama-perplexity's protocol (windows of 512, second half scored) on WikiText-2
#      test and on a book (../shared/data/austen/pride_and_prejudice.txt, when present);
#   2. the tokenizer: kvc-tokenize against llama-tokenize on every text of data/tokenizers/corpus.json;
#   3. prefill and decode tok/s: kvc-bench against llama-bench.
# llama.cpp comes from scripts/build_llama_cpp.sh (built on first use, about 20 min on 2 cores).
# Writes data/results/gemma3/vs_llama_cpp.{json,md}.
#   recipes/gemma3_vs_llama_cpp.sh             # 60 windows per text, 2 threads
#   KVC_THREADS=4 KVC_PPL_WINDOWS=0 recipes/gemma3_vs_llama_cpp.sh   # every window
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
GGUF=$(scripts/model_path.sh gemma3-270m)
THREADS=${KVC_THREADS:-2}
WINDOWS=${KVC_PPL_WINDOWS:-60}
CTX=512
PROMPT=512
DECODE=64
BOOK=${KVC_BOOK:-../shared/data/austen/pride_and_prejudice.txt}
OUT=data/results/gemma3
# KVC_SMOKE=1 (the README test suite): kvc's side at small sizes into a scratch folder; llama.cpp's side
# only if it is already built (the suite does not build it).
if [ -n "${KVC_SMOKE:-}" ]; then WINDOWS=1; PROMPT=64; DECODE=4; OUT=$(mktemp -d); fi
if [ -n "${KVC_SMOKE:-}" ] && [ ! -x .llama.cpp/build/bin/llama-bench ]; then LLAMA=""; else LLAMA=$(scripts/build_llama_cpp.sh); fi
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

texts=(data/text/wikitext2/wiki.test.raw)
[ -f "$BOOK" ] && texts+=("$BOOK")

# 1. Perplexity. llama-perplexity prints "[k]ppl," after each window and a final estimate.
for text in "${texts[@]}"; do
  name=$(basename "$text")
  "$BIN/kvc-eval" ppl -m "$GGUF" -f "$text" -c $CTX --max-windows "$WINDOWS" --protocol llama.cpp -t "$THREADS" \
    --json > "$work/kvc_ppl_$name.json"
  if [ -n "$LLAMA" ]; then
    # The same tokens: both tokenize the whole file (with BOS), compared id for id below.
    "$BIN/kvc-tokenize" -m "$GGUF" -f "$text" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['ids'])" \
      > "$work/kvc_ids_$name.json"
    "$LLAMA/llama-tokenize" -m "$GGUF" -f "$text" --ids --no-escape --log-disable 2>/dev/null | tail -n 1 \
      > "$work/llama_ids_$name.json"
    chunks=()
    [ "$WINDOWS" -gt 0 ] && chunks=(--chunks "$WINDOWS")
    "$LLAMA/llama-perplexity" -m "$GGUF" -f "$text" -c $CTX -b $CTX "${chunks[@]}" -t "$THREADS" \
      > "$work/llama_ppl_$name.txt" 2>&1
  fi
done

# 2. Tokenizer, text by text (no BOS on either side).
python3 - "$work" <<'PY'
import json, pathlib, sys
texts = json.loads(pathlib.Path("data/tokenizers/corpus.json").read_text(encoding="utf-8"))["texts"]
for i, t in enumerate(texts):
    pathlib.Path(sys.argv[1], f"text{i:03d}.txt").write_bytes(t.encode("utf-8"))
PY
for f in "$work"/text*.txt; do
  "$BIN/kvc-tokenize" -m "$GGUF" -f "$f" --no-bos --json | python3 -c "import json,sys; print(json.load(sys.stdin)['ids'])" \
    > "${f%.txt}.kvc"
  if [ -n "$LLAMA" ]; then
    "$LLAMA/llama-tokenize" -m "$GGUF" -f "$f" --ids --no-bos --no-escape --log-disable 2>/dev/null | tail -n 1 > "${f%.txt}.llama"
  fi
done

# 3. Speed, same prompt length, decode length and threads.
"$BIN/kvc-bench" -m "$GGUF" --contexts $PROMPT --decode-tokens $DECODE -t "$THREADS" --json > "$work/kvc_bench.json"
if [ -n "$LLAMA" ]; then
  "$LLAMA/llama-bench" -m "$GGUF" -p $PROMPT -n $DECODE -t "$THREADS" -r 3 -o json > "$work/llama_bench.json" 2>/dev/null
fi

python3 - "$work" "$OUT" "$THREADS" "$CTX" "${texts[@]}" <<'PY'
import json, pathlib, re, sys
work, out, threads, ctx, texts = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
result = {"threads": threads, "ctx": ctx, "perplexity": [], "tokenizer": {}, "speed": {}}
lines = ["| what | kvc | llama.cpp | note |", "|---|---|---|---|"]

for text in texts:
    name = pathlib.Path(text).name
    k = json.loads((work / f"kvc_ppl_{name}.json").read_text())
    row = {"file": name, "windows": k["windows"], "tokens_scored": k["tokens_scored"], "kvc": k["ppl"],
           "kvc_running": k["running_ppl"]}
    llama_txt = work / f"llama_ppl_{name}.txt"
    if llama_txt.exists():
        log = llama_txt.read_text(errors="replace")
        running = [float(v) for v in re.findall(r"\[\d+\]([0-9.]+)", log)]
        final = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", log)
        row["llama_cpp_running"] = running
        row["llama_cpp"] = float(final.group(1)) if final else None
        row["llama_cpp_stderr"] = float(final.group(2)) if final else None
        n = min(len(running), len(row["kvc_running"]))
        row["max_rel_diff_running"] = max(abs(a / b - 1) for a, b in zip(row["kvc_running"][:n], running[:n])) if n else None
        kvc_ids = json.loads((work / f"kvc_ids_{name}.json").read_text())
        llama_ids = json.loads((work / f"llama_ids_{name}.json").read_text())
        row["file_tokens"] = len(llama_ids)
        row["same_tokens"] = kvc_ids == llama_ids
    result["perplexity"].append(row)
    llama = f"{row['llama_cpp']:.4f} ± {row['llama_cpp_stderr']:.4f}" if row.get("llama_cpp") else "—"
    lines.append(f"| perplexity, {name}, {row['windows']} windows of {ctx} ({row['tokens_scored']:,} tokens scored) "
                 f"| {row['kvc']:.4f} | {llama} | ratio {row['kvc'] / row['llama_cpp']:.4f}, running max rel. diff "
                 f"{row['max_rel_diff_running']:.2%}; file tokenized {'identically' if row['same_tokens'] else 'DIFFERENTLY'} "
                 f"({row['file_tokens']:,} tokens) |" if row.get("llama_cpp") else
                 f"| perplexity, {name} | {row['kvc']:.4f} | — | llama.cpp not built |")

kvc_files = sorted(work.glob("text*.kvc"))
same = tokens = 0
compared = 0
for f in kvc_files:
    other = f.with_suffix(".llama")
    if not other.exists():
        continue
    a = json.loads(f.read_text())
    b = json.loads(other.read_text())
    compared += 1
    same += a == b
    tokens += len(b)
result["tokenizer"] = {"texts": len(kvc_files), "compared": compared, "identical": same, "llama_cpp_tokens": tokens}
if compared:
    lines.append(f"| tokenizer, data/tokenizers/corpus.json | {same}/{compared} texts identical | {tokens:,} tokens | |")

kb = json.loads((work / "kvc_bench.json").read_text())
run = kb["runs"][0]
speed = {"prompt": run["context"], "kvc_prefill_tps": run["prefill_tokens_per_second"],
         "kvc_decode_tps": run["decode_tokens_per_second"], "kvc_weight_bytes_per_decode_step": kb["weight_bytes_per_decode_step"]}
lb_path = work / "llama_bench.json"
if lb_path.exists():
    lb = json.loads(lb_path.read_text())
    pp = next(r for r in lb if r["n_prompt"] > 0 and r["n_gen"] == 0)
    tg = next(r for r in lb if r["n_gen"] > 0 and r["n_prompt"] == 0)
    speed.update(llama_cpp_prefill_tps=pp["avg_ts"], llama_cpp_decode_tps=tg["avg_ts"], llama_cpp_build=pp.get("build_commit"))
    lines.append(f"| prefill tok/s, prompt of {run['context']}, {threads} threads | {speed['kvc_prefill_tps']:.0f} | "
                 f"{speed['llama_cpp_prefill_tps']:.0f} | kvc/llama.cpp {speed['kvc_prefill_tps'] / speed['llama_cpp_prefill_tps']:.2f} |")
    lines.append(f"| decode tok/s, {tg['n_gen']} tokens, {threads} threads | {speed['kvc_decode_tps']:.1f} | "
                 f"{speed['llama_cpp_decode_tps']:.1f} | kvc/llama.cpp {speed['kvc_decode_tps'] / speed['llama_cpp_decode_tps']:.2f} |")
result["speed"] = speed
(out / "vs_llama_cpp.json").write_text(json.dumps(result, indent=1) + "\n")
(out / "vs_llama_cpp.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
