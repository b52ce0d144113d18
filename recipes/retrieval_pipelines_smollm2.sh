#!/usr/bin/env bash
# DynaKV's Pipeline 1 on SmolLM2-135M-Instruct (30 layers, 3 KV heads of 64): the clustered retrieval
# cache with its centroids in RAM (`centroids=ram`, the default) against centroids on storage, written
# after each layer's step and read back while the layer before it computes (`centroids=storage`), with
# and without next-layer prefetch of the clusters, beside the dense cache. One prompt of essay text,
# greedy decoding; the runs alternate (dense, then each spec, REPEATS rounds) and the table reports
# medians, so the machine's swings in storage and memory bandwidth fall on every side alike.
# Writes OUT/pipelines_smollm2.{jsonl,md}: decode and prefill speed, the KV cache's RAM at the end
# (centroids included when they stay in RAM), the centroids' most bytes in RAM, their reads and writes
# per step and the decode thread's wait for them.
#   recipes/retrieval_pipelines_smollm2.sh
#   PROMPT_TOKENS=8192 REPEATS=5 THREADS=2 recipes/retrieval_pipelines_smollm2.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
PROMPT_TOKENS="${PROMPT_TOKENS:-4096}"
NEW_TOKENS="${NEW_TOKENS:-32}"
REPEATS="${REPEATS:-3}"
THREADS="${THREADS:-1}"
SPECS="adaptive:budget=1024 adaptive:budget=1024,centroids=storage adaptive:budget=1024,prefetch=1 adaptive:budget=1024,prefetch=1,centroids=storage"
OUT="${OUT:-data/results/retrieval}"
MODEL=""
# KVC_SMOKE=1 (the documentation's tests): the repository's model, a short prompt, one round.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; PROMPT_TOKENS=300; NEW_TOKENS=4; REPEATS=1; OUT=$(mktemp -d)
  SPECS="adaptive:budget=64 adaptive:budget=64,centroids=storage"
fi
[ -n "$MODEL" ] || MODEL=$(scripts/model_path.sh smollm2-135m)
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat data/text/pg_essays/*.txt > "$work/prompt.txt"
runs="$OUT/pipelines_smollm2.jsonl"
: > "$runs.partial"
for round in $(seq 1 "$REPEATS"); do
  for spec in none $SPECS; do
    flags=()
    [ "$spec" = none ] || flags=(--retrieval "$spec")
    "$BIN/kvc-generate" -m "$MODEL" -f "$work/prompt.txt" --prompt-tokens "$PROMPT_TOKENS" -n "$NEW_TOKENS" \
      --ignore-eos -t "$THREADS" -q "${flags[@]}" --json-out "$work/run.json" > /dev/null
    python3 - "$spec" "$round" "$work/run.json" >> "$runs.partial" <<'EOF'
import json, sys
spec, round_, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
run = json.load(open(path))
report = run.get("cache_report") or {}
print(json.dumps({"spec": spec, "round": round_, "prompt_tokens": run["prompt_tokens"],
                  "generated_tokens": run["generated_tokens"], "threads": run["threads"],
                  "prefill_tokens_per_second": run["prefill_tokens_per_second"],
                  "decode_tokens_per_second": run["decode_tokens_per_second"],
                  "kv_resident_bytes": run["kv_resident_bytes"], "kv_peak_resident_bytes": run["kv_peak_resident_bytes"],
                  "decode_steps": report.get("decode_steps", 0), "io_wait_seconds": report.get("io_wait_seconds", 0),
                  "centroids": report.get("centroids", {})}))
EOF
    echo "round $round: $spec done" >&2
  done
done
mv "$runs.partial" "$runs"
python3 - "$runs" "$OUT/pipelines_smollm2.md" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
specs = list(dict.fromkeys(r["spec"] for r in rows))
med = lambda xs: statistics.median(xs) if xs else 0.0
first = rows[0]
lines = [f"Prompt {first['prompt_tokens']} tokens, {first['generated_tokens']} generated, {first['threads']} thread(s); "
         f"medians of {max(r['round'] for r in rows)} alternated rounds.", "",
         "| cache | decode tok/s | vs dense | prefill tok/s | KV cache RAM at the end | centroids: most in RAM "
         "| centroids read / written per step | wait for centroids per step | wait for clusters per step |",
         "|---|---|---|---|---|---|---|---|---|"]
dense = med([r["decode_tokens_per_second"] for r in rows if r["spec"] == "none"])
for spec in specs:
    rs = [r for r in rows if r["spec"] == spec]
    decode = med([r["decode_tokens_per_second"] for r in rs])
    steps = max(1, rs[0]["decode_steps"])
    c = rs[0]["centroids"]
    on_storage = c.get("on") == "storage"
    cent_ram = f"{med([r['centroids']['peak_ram_bytes'] for r in rs]) / 1024:.0f} KiB" if on_storage else (
        "—" if spec == "none" else "all, in the cache's RAM")
    traffic = (f"{c['read_bytes'] / steps / 2**20:.2f} / {c['written_bytes'] / steps / 2**20:.2f} MiB"
               if on_storage else "—")
    wait = f"{1e3 * med([r['centroids']['wait_seconds'] for r in rs]) / steps:.2f} ms" if on_storage else "—"
    io_wait = "—" if spec == "none" else f"{1e3 * med([r['io_wait_seconds'] for r in rs]) / steps:.2f} ms"
    lines.append(f"| {'dense' if spec == 'none' else '`' + spec + '`'} | {decode:.2f} | {decode / dense:.2f}× | "
                 f"{med([r['prefill_tokens_per_second'] for r in rs]):.0f} | "
                 f"{med([r['kv_resident_bytes'] for r in rs]) / 2**20:.2f} MiB | {cent_ram} | {traffic} | {wait} | {io_wait} |")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
