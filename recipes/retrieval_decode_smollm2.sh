#!/usr/bin/env bash
# Decoding with the clustered retrieval cache on SmolLM2-135M-Instruct (30 layers, 3 KV heads of 64),
# beside the dense cache. One prompt of essay text, greedy decoding; the runs alternate (dense, then each
# spec, REPEATS rounds) and the table reports medians, so the machine's swings in storage and memory
# bandwidth fall on every side alike. SET chooses the specs:
#  - pipelines (default): DynaKV's two pipelines.
#    Pipeline 1 (`centroids=storage`): each layer's centroids written to storage after its step and read
#    back while the layer before it computes, against centroids kept in RAM (the default).
#    Pipeline 2 (`virtual=1`): a RAM cluster cache of cache_kb per layer, parked on storage between the
#    layer's steps and read back while the layer before it computes, against one model-wide cache of the
#    same total size (L x cache_kb) kept in RAM. Then both together.
#  - strategies: the update strategies and the systems DynaKV compares with, at the same entry budget:
#    adaptive (DynaKV), static (nearest-cluster append), local (ClusterKV-style clustering of the new
#    entries) and pq (PQCache-style product-quantised search over every entry).
# Writes OUT/<SET>_smollm2.{jsonl,md}: decode speed, the KV cache's RAM at the end (centroids included
# when they stay in RAM), the centroids' and the cluster cache's most bytes in RAM, the cache's hit rate,
# the bytes read per step and the decode thread's waits.
#   recipes/retrieval_decode_smollm2.sh
#   SET=strategies recipes/retrieval_decode_smollm2.sh
#   PROMPT_TOKENS=8192 REPEATS=5 THREADS=2 recipes/retrieval_decode_smollm2.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BUILD:-build}/bin"
PROMPT_TOKENS="${PROMPT_TOKENS:-4096}"
NEW_TOKENS="${NEW_TOKENS:-32}"
REPEATS="${REPEATS:-3}"
THREADS="${THREADS:-1}"
SET="${SET:-pipelines}"
LAYER_KB=512
case "$SET" in
  pipelines)
    SPECS="adaptive:budget=1024 adaptive:budget=1024,centroids=storage adaptive:budget=1024,cache_kb=$((30 * LAYER_KB))
adaptive:budget=1024,cache_kb=$LAYER_KB,virtual=1 adaptive:budget=1024,cache_kb=$LAYER_KB,virtual=1,centroids=storage" ;;
  strategies) SPECS="adaptive:budget=1024 static:budget=1024 local:budget=1024 pq:budget=1024" ;;
  *) echo "SET must be pipelines or strategies, got '$SET'" >&2; exit 2 ;;
esac
OUT="${OUT:-data/results/retrieval}"
MODEL=""
# KVC_SMOKE=1 (the documentation's tests): the repository's model, a short prompt, one round.
if [ -n "${KVC_SMOKE:-}" ]; then
  MODEL=data/models/kvc-micro-lm; PROMPT_TOKENS=300; NEW_TOKENS=4; REPEATS=1; OUT=$(mktemp -d)
  SPECS="adaptive:budget=64 adaptive:budget=64,centroids=storage adaptive:budget=64,cache_kb=8,virtual=1"
  [ "$SET" = pipelines ] || SPECS="local:budget=64 pq:budget=64"
fi
[ -n "$MODEL" ] || MODEL=$(scripts/model_path.sh smollm2-135m)
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat data/text/pg_essays/*.txt > "$work/prompt.txt"
runs="$OUT/${SET}_smollm2.jsonl"
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
                  "read_bytes": report.get("read_bytes", 0), "cache_lookups": report.get("cache_lookups", 0),
                  "cache_hits": report.get("cache_hits", 0), "cache_peak_bytes": report.get("cache_peak_bytes", 0),
                  "centroids": report.get("centroids", {}), "virtual_cache": report.get("virtual_cache", {})}))
EOF
    echo "round $round: $spec done" >&2
  done
done
mv "$runs.partial" "$runs"
python3 - "$runs" "$OUT/${SET}_smollm2.md" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
specs = list(dict.fromkeys(r["spec"] for r in rows))
med = lambda xs: statistics.median(xs) if xs else 0.0
first = rows[0]
lines = [f"Prompt {first['prompt_tokens']} tokens, {first['generated_tokens']} generated, {first['threads']} thread(s); "
         f"medians of {max(r['round'] for r in rows)} alternated rounds.", "",
         "| cache | decode tok/s | vs dense | KV cache RAM at the end | centroids: most in RAM | cluster cache: most in "
         "RAM, hit rate | read per step (store pages) | wait per step: clusters, centroids, cache read back |",
         "|---|---|---|---|---|---|---|---|"]
dense = med([r["decode_tokens_per_second"] for r in rows if r["spec"] == "none"])
for spec in specs:
    rs = [r for r in rows if r["spec"] == spec]
    decode = med([r["decode_tokens_per_second"] for r in rs])
    name = "dense" if spec == "none" else "`" + spec + "`"
    if spec == "none":
        lines.append(f"| {name} | {decode:.2f} | 1.00× | {med([r['kv_resident_bytes'] for r in rs]) / 2**20:.2f} MiB "
                     "| — | — | — | — |")
        continue
    steps = max(1, rs[0]["decode_steps"])
    c, v = rs[0]["centroids"], rs[0]["virtual_cache"]
    kib = lambda b: f"{b / 1024:.0f} KiB" if b < 2**20 else f"{b / 2**20:.1f} MiB"
    cent = kib(med([r["centroids"]["peak_ram_bytes"] for r in rs])) if c.get("on") == "storage" else "all (in the cache's RAM)"
    if spec.startswith("pq"):
        cent = "none (a code per key, in the cache's RAM)"
    cache_peak = med([r["cache_peak_bytes"] + r["virtual_cache"].get("peak_in_flight_bytes", 0) for r in rs])
    hit = med([r["cache_hits"] / max(1, r["cache_lookups"]) for r in rs])
    read = med([r["read_bytes"] for r in rs]) / steps / 2**20
    extra = []
    if v.get("on"):
        extra.append(f"(records read back into the cache: {v['read_bytes'] / steps / 2**20:.1f} MiB)")
    if c.get("on") == "storage":
        extra.append(f"+ {c['read_bytes'] / steps / 2**20:.1f} MiB centroids")
    read_cell = " ".join([f"{read:.1f} MiB"] + extra)
    waits = [f"{1e3 * med([r['io_wait_seconds'] for r in rs]) / steps:.0f} ms"]
    waits.append(f"{1e3 * med([r['centroids']['wait_seconds'] for r in rs]) / steps:.1f} ms" if c.get("on") == "storage" else "—")
    waits.append(f"{1e3 * med([r['virtual_cache']['wait_seconds'] for r in rs]) / steps:.1f} ms" if v.get("on") else "—")
    lines.append(f"| {name} | {decode:.2f} | {decode / dense:.2f}× | {med([r['kv_resident_bytes'] for r in rs]) / 2**20:.2f} MiB "
                 f"| {cent} | {kib(cache_peak)}, {hit:.3f} | {read_cell} | {', '.join(waits)} |")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
