#!/usr/bin/env python3
"""Result tables of the documentation, generated from data/results.

A table in README.md, docs/*.md or apps/*/README.md that comes from a measured result is written
between two marker lines:

    <!-- table: data/results/AREA/FILE [SELECTOR] -->
    | ... the table ... |
    <!-- end table -->

SOURCE is a path under data/results. What the block must hold:
  - SOURCE is a .md file: its markdown tables, joined by a blank line. `table=N` keeps the Nth table
    of the file (1-based) and `rows=REGEX` keeps the header and the rows that match REGEX
    (re.search); both may be given, `table=` applies first.
  - SOURCE is a .json, .jsonl or .csv file (optionally .gz): `render=NAME` names one of the renderers
    below, which computes the table from the file and, where the recipe writes several, the files it
    names beside it (`--list` prints them).

  scripts/docs_tables.py [--check]      exit 1 and list every block that differs from its source
  scripts/docs_tables.py --write        rewrite those blocks in place from their sources
  scripts/docs_tables.py --root DIR     the repository root to scan (default: this script's repository)

A marker whose source is missing, a selector that selects nothing and an unknown renderer are errors
in both modes. Python 3 standard library only.
"""
import argparse
import csv
import decimal
import glob
import gzip
import io
import json
import os
import re
import statistics
import sys
import tempfile

START = re.compile(r"^<!-- table: (?P<source>\S+)(?:\s+(?P<selector>.*?))?\s*-->\s*$")
END = re.compile(r"^<!-- end table -->\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
RESULTS = "data/results"


class SourceError(Exception):
    """A marker that cannot be rendered: missing source, bad selector, inconsistent data."""


# ---------------------------------------------------------------------------------------------------
# Reading sources.

def read_text(path):
    if path.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    with open(path, encoding="utf-8") as f:
        return f.read()


def read_json(path):
    return json.loads(read_text(path))


def read_jsonl(path):
    return [json.loads(line) for line in read_text(path).split("\n") if line.strip()]


def read_csv(path):
    return list(csv.DictReader(io.StringIO(read_text(path))))


def markdown_tables(text):
    """The markdown tables of a text: runs of lines that start with '|', outside code fences."""
    tables, current, fenced = [], [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        if not fenced and line.startswith("|"):
            current.append(line.rstrip())
            continue
        if current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def parse_selector(text):
    """`key=value key=value`; a value runs to the next ` key=` or the end, so a regex may hold spaces."""
    selector = {}
    if not text:
        return selector
    for m in re.finditer(r"(\w+)=(.*?)(?=\s+\w+=|\s*$)", text.strip()):
        selector[m.group(1)] = m.group(2)
    rebuilt = " ".join(f"{k}={v}" for k, v in selector.items())
    if not selector or re.sub(r"\s+", " ", text.strip()) != re.sub(r"\s+", " ", rebuilt):
        raise SourceError(f"cannot read the selector '{text}' (expected key=value, key one of table, rows, render)")
    unknown = set(selector) - {"table", "rows", "render"}
    if unknown:
        raise SourceError(f"unknown selector key(s) {', '.join(sorted(unknown))} (known: table, rows, render)")
    return selector


def render_markdown(path, selector, source):
    if "render" in selector:
        raise SourceError("render= applies to .json/.jsonl/.csv sources; a .md source takes table= and rows=")
    tables = markdown_tables(read_text(path))
    if not tables:
        raise SourceError(f"{source} holds no markdown table")
    if "table" in selector:
        try:
            n = int(selector["table"])
        except ValueError:
            raise SourceError(f"table={selector['table']} is not a number")
        if not 1 <= n <= len(tables):
            raise SourceError(f"table={n}, but {source} holds {len(tables)} table(s)")
        tables = [tables[n - 1]]
    if "rows" in selector:
        try:
            pattern = re.compile(selector["rows"])
        except re.error as e:
            raise SourceError(f"rows={selector['rows']} is not a regular expression: {e}")
        tables = [t[:2] + [row for row in t[2:] if pattern.search(row)] for t in tables]
        tables = [t for t in tables if len(t) > 2]
        if not tables:
            raise SourceError(f"rows={selector['rows']} matches no row of {source}")
    lines = []
    for i, t in enumerate(tables):
        if i:
            lines.append("")
        lines.extend(t)
    return lines


# ---------------------------------------------------------------------------------------------------
# Renderers: tables whose shape is the document's own, computed from a .json, .jsonl or .csv result.

RENDERERS = {}


def renderer(name, source_name):
    """Register a renderer for sources whose file name is source_name."""
    def register(fn):
        RENDERERS[name] = (fn, source_name)
        return fn
    return register


# recipes/gguf_vs_llama_cpp.sh writes vs_llama_cpp.json (every round) and vs_llama_cpp.md (medians).
# The renderers take the medians of the rounds as the recipe does (statistics.median of each round's
# value; ratios of the medians) and check them against the summary in the .json and the rows of the .md
# beside it, so a .md and a .json from different runs are refused rather than mixed.
GGUF_MODEL_NAMES = {"gemma3-270m": "Gemma 3 270M Q4_K_M", "smollm2-135m": "SmolLM2-135M-Instruct Q4_1"}


def _fmt(v, d=1):
    return f"{v:,.{d}f}"


def _gguf_models(path):
    data = read_json(path)
    md_path = re.sub(r"\.json(\.gz)?$", ".md", path)
    if not os.path.exists(md_path):
        raise SourceError(f"{os.path.basename(md_path)}, which the recipe writes beside the .json, is missing")
    md_rows = {}
    for table in markdown_tables(read_text(md_path)):
        for row in table[2:]:
            cells = [c.strip() for c in row.strip().strip("|").split("|")]
            md_rows.setdefault(cells[0], []).append(cells[1:])

    def md_row(model, pattern):
        for cells in md_rows.get(model, []):
            m = re.fullmatch(pattern, cells[0])
            if m:
                return m, cells
        raise SourceError(f"vs_llama_cpp.md has no row '{pattern}' for {model}")

    def agree(model, what, cells, kvc, llama, ratio=None):
        expect = [kvc, llama] + ([ratio] if ratio is not None else [])
        got = [cells[1], cells[2]] + ([cells[3].split(" ")[0]] if ratio is not None else [])
        if got != expect:
            raise SourceError(f"vs_llama_cpp.md and .json disagree on {model}, {what}: "
                              f"md {' / '.join(got)}, json {' / '.join(expect)}")

    def same(a, b, what):
        if b is not None and abs(a - b) > 1e-9 * max(1.0, abs(b)):
            raise SourceError(f"vs_llama_cpp.json: the median of the rounds' {what} is {a}, its summary says {b}")

    med = statistics.median
    models = []
    for name, res in data["models"].items():
        if name not in GGUF_MODEL_NAMES:
            raise SourceError(f"vs_llama_cpp.json: no display name for model '{name}' (GGUF_MODEL_NAMES in {__file__})")
        rounds = res["rounds"]
        m = {"name": GGUF_MODEL_NAMES[name], "decode": []}

        def pair(kvc_vals, llama_vals, summary, what):
            k, l = med(kvc_vals), med(llama_vals)
            same(k, summary.get("kvc"), what + " (kvc)")
            same(l, summary.get("llama_cpp"), what + " (llama.cpp)")
            return k, l

        k, l = pair([r["kvc_prefill"] for r in rounds], [r["llama_prefill"] for r in rounds], res["prefill"], "prefill")
        match, cells = md_row(name, r"prefill tok/s, (\d+) tokens")
        agree(name, "prefill", cells, _fmt(k), _fmt(l), f"{k / l:.2f}")
        m["prefill"] = (int(match.group(1)), k, l)
        for c in sorted(rounds[0]["kvc_decode"], key=int):
            k, l = pair([r["kvc_decode"][c] for r in rounds], [r["llama_decode"][c] for r in rounds],
                        res["decode"][c], f"decode after {c}")
            _, cells = md_row(name, rf"decode tok/s after {c} tokens")
            agree(name, f"decode after {c}", cells, _fmt(k), _fmt(l), f"{k / l:.2f}")
            m["decode"].append((int(c), k, l))
        m["headline"] = None
        if "headline" in rounds[0]:
            h = [r["headline"] for r in rounds]
            k, l = pair([x["kvc_snapkv"] for x in h], [x["llama"] for x in h], res["headline"], "headline decode")
            match, cells = md_row(name, r"decode tok/s after (\d+) tokens, kvc SnapKV ([0-9.]+) vs llama\.cpp uncompressed")
            agree(name, "headline decode", cells, _fmt(k), _fmt(l), f"{k / l:.2f}")
            m["headline"] = (int(match.group(1)), match.group(2), k, l)
        rss = res["peak_rss_bytes"]
        match, cells = md_row(name, r"peak RSS, (\d+)-token prompt \+ (\d+) generated, MB")
        k_mb, l_mb = f"{rss['kvc'] / 1e6:.0f}", _fmt(rss["llama_cpp"] / 1e6, 0)
        agree(name, "peak RSS", cells, k_mb, l_mb)
        m["rss"] = (int(match.group(1)), int(match.group(2)), k_mb, l_mb)
        p = res["perplexity"]
        _, cells = md_row(name, rf"perplexity, WikiText-2 test, {p['windows']} windows of 512 \([0-9,]+ tokens scored\)")
        agree(name, "perplexity", cells, f"blocks {p['kvc_blocks']:.4f}, float32 {p['kvc_float32']:.4f}",
              f"{p['llama_cpp']:.4f}")
        m["ppl"] = p
        models.append(m)
    return models


@renderer("gguf_headline", "vs_llama_cpp.json")
def gguf_headline(path):
    """README's headline: kvc / llama.cpp speed ratios and both perplexities, one row per model."""
    models = _gguf_models(path)
    first = models[0]
    if any([c for c, _, _ in m["decode"]] != [c for c, _, _ in first["decode"]] or
           m["prefill"][0] != first["prefill"][0] or m["ppl"]["windows"] != first["ppl"]["windows"] for m in models):
        raise SourceError("vs_llama_cpp.json: the models were measured at different lengths; one table cannot hold them")
    header = (f"| model | prefill {first['prefill'][0]}, kvc / llama.cpp | "
              + " | ".join(f"decode after {c}" for c, _, _ in first["decode"])
              + f" | perplexity, WikiText-2, {first['ppl']['windows']} windows: kvc, llama.cpp |")
    lines = [header, "|---|---:|" + "---:|" * len(first["decode"]) + "---|"]
    for m in models:
        _, k, l = m["prefill"]
        cells = [f"{k / l:.2f}"] + [f"{k / l:.2f}" for _, k, l in m["decode"]]
        cells.append(f"{m['ppl']['kvc_blocks']:.4f}, {m['ppl']['llama_cpp']:.4f}")
        lines.append(f"| {m['name']} | " + " | ".join(cells) + " |")
    return lines


@renderer("gguf_speed", "vs_llama_cpp.json")
def gguf_speed(path):
    """docs/gguf-block-weights.md: speed and peak RSS, kvc and llama.cpp; the RSS ratio is that of the MB shown."""
    lines = ["| model | measure | kvc | llama.cpp | ratio |", "|---|---|---:|---:|---:|"]
    for m in _gguf_models(path):
        rows = []
        n, k, l = m["prefill"]
        rows.append((f"prefill, {n} tokens, tok/s", _fmt(k), _fmt(l), f"{k / l:.2f}"))
        for c, k, l in m["decode"]:
            rows.append((f"decode after {c} tokens, tok/s", _fmt(k), _fmt(l), f"{k / l:.2f}"))
        if m["headline"]:
            c, ratio, k, l = m["headline"]
            rows.append((f"decode after {c} tokens: kvc SnapKV {ratio} vs llama.cpp uncompressed, tok/s",
                         _fmt(k), _fmt(l), f"{k / l:.2f}"))
        prompt, generated, k_mb, l_mb = m["rss"]
        rows.append((f"peak RSS, {prompt}-token prompt + {generated} generated, MB", k_mb, l_mb,
                     f"{float(k_mb.replace(',', '')) / float(l_mb.replace(',', '')):.2f}"))
        for i, row in enumerate(rows):
            lines.append((f"| {m['name']} | " if i == 0 else "| | ") + " | ".join(row) + " |")
    return lines


@renderer("gguf_perplexity", "vs_llama_cpp.json")
def gguf_perplexity(path):
    """docs/gguf-block-weights.md: perplexity on blocks, dequantized, and llama-perplexity's."""
    lines = ["| model | kvc, blocks | kvc, dequantized to float32 | llama-perplexity | blocks / float32 | blocks / llama.cpp |",
             "|---|---:|---:|---:|---:|---:|"]
    for m in _gguf_models(path):
        p = m["ppl"]
        lines.append(f"| {m['name']} | {p['kvc_blocks']:.4f} | {p['kvc_float32']:.4f} | {p['llama_cpp']:.4f} | "
                     f"{p['kvc_blocks'] / p['kvc_float32']:.4f} | {p['kvc_blocks'] / p['llama_cpp']:.4f} |")
    return lines


# The renderers below round a number half up from its decimal form in the source (0.3125 is 0.313),
# and take a ratio or share from the values it is a ratio of (tok/s, bytes) where the source holds
# them, not from a column already rounded.

def _r(v, d=0, grouping=False):
    """v rounded half up to d decimals; grouping puts thousands separators."""
    q = decimal.Decimal(repr(float(v))).quantize(decimal.Decimal(1).scaleb(-d), rounding=decimal.ROUND_HALF_UP)
    return f"{q:,}" if grouping else f"{q}"


def _beside(path, rel):
    """The file rel (relative to path's folder) that a renderer reads with its source."""
    other = os.path.normpath(os.path.join(os.path.dirname(path), rel))
    if not os.path.isfile(other):
        raise SourceError(f"{rel}, which the renderer reads beside {os.path.basename(path)}, is missing")
    return other


def _name(names, key, table):
    if key not in names:
        raise SourceError(f"no display name for '{key}' ({table} in {__file__})")
    return names[key]


def _median_speedups(runs, key, base, tok="decode_tok_s", group=lambda r: ()):
    """{(group, key): median over repeats of the run's tok/s over the same repeat's `base` run}: the
    speed-up the recipes write, from the runs' tok/s rather than its rounded median."""
    tok_s = {(group(r), r["repeat"], r[key]): float(r[tok]) for r in runs}
    ratios = {}
    for (g, repeat, name), v in tok_s.items():
        if (g, repeat, base) not in tok_s:
            raise SourceError(f"repeat {repeat} has no '{base}' run to compare {name} with")
        ratios.setdefault((g, name), []).append(v / tok_s[(g, repeat, base)])
    return {k: statistics.median(v) for k, v in ratios.items()}


def _agrees(value, rounded, what):
    """A median taken here against the recipe's own, written to 3 decimals."""
    if abs(value - float(rounded)) > 0.0005 + 1e-9:
        raise SourceError(f"{what}: the runs give {value:.4f}, the summary says {rounded}; files from different runs?")


EVICTION_NAMES = {"none": "uncompressed", "streaming_llm": "StreamingLLM", "snapkv": "SnapKV",
                  "pyramidkv": "PyramidKV", "dynamickv": "DynamicKV", "ada": "Ada (SnapKV)",
                  "kvcompose": "KVCompose", "h2o": "H2O", "tova": "TOVA", "d2o": "D2O"}
# Presses that keep evicting while decoding; the KL protocol lets the others' caches grow back.
EVICTION_BOUNDED = ("streaming_llm", "h2o", "tova", "d2o")


@renderer("eviction_kl", "sweep.jsonl")
def eviction_kl(path):
    """docs/eviction.md: KL against the exact model per press and ratio (recipes/eviction_sweep.sh), bounded presses last."""
    kl = {}
    for r in read_jsonl(path):
        if r["ratio"] in kl.setdefault(r["press"], {}):
            raise SourceError(f"sweep.jsonl holds {r['press']} at {r['ratio']} twice")
        kl[r["press"]][r["ratio"]] = r["kl"]
    ratios = sorted({x for by_ratio in kl.values() for x in by_ratio})
    lines = ["| method | " + " | ".join(f"KL@{x:g}" for x in ratios) + " |", "|---|" + "---|" * len(ratios)]
    for bounded in (False, True):
        for press, by_ratio in kl.items():
            if (press in EVICTION_BOUNDED) == bounded:
                label = press + (" (bounded)" if bounded else " (snapkv)" if press == "ada" else "")
                cells = [_r(by_ratio[x], 4) if x in by_ratio else "" for x in ratios]
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


# The needle table's rows: presses in one row show "a / b", or one value where every cell is equal.
EVICTION_NEEDLE_ROWS = (("kvcompose",), ("snapkv",), ("ada",), ("dynamickv",), ("pyramidkv",), ("streaming_llm",),
                        ("h2o", "d2o"), ("tova", "knorm"))
EVICTION_NEEDLE_RATIOS = (0.25, 0.5, 0.9)


@renderer("eviction_needle", "results.csv")
def eviction_needle(path):
    """docs/eviction.md: needle accuracy question-aware (aware/results.csv) and -agnostic (../agnostic/results.csv)."""
    if os.path.basename(os.path.dirname(path)) != "aware":
        raise SourceError("eviction_needle reads aware/results.csv and ../agnostic/results.csv beside it")
    score = {}
    for query, p in (("aware", path), ("agnostic", _beside(path, "../agnostic/results.csv"))):
        for r in read_csv(p):
            score[(query, r["method"], float(r["ratio"]))] = float(r["score"])
    columns = [(q, x) for q in ("aware", "agnostic") for x in EVICTION_NEEDLE_RATIOS]
    lines = ["| method | " + " | ".join(f"{q}@{x:g}" for q, x in columns) + " |", "|---|" + "---|" * len(columns)]
    for presses in EVICTION_NEEDLE_ROWS:
        cells = []
        for q, x in columns:
            if any((q, p, x) not in score for p in presses):
                raise SourceError(f"{q}/results.csv has no row for {' or '.join(presses)} at {x:g}")
            cells.append(["0" if score[(q, p, x)] == 0 else _r(score[(q, p, x)], 3) for p in presses])
        names = [p + (" (snapkv)" if p == "ada" else "") for p in presses]
        if all(len(set(c)) == 1 for c in cells):
            lines.append(f"| {', '.join(names)} | " + " | ".join(c[0] for c in cells) + " |")
        else:
            lines.append(f"| {' / '.join(names)} | " + " | ".join(" / ".join(c) for c in cells) + " |")
    return lines


@renderer("prefill_statistics", "prefill_statistics_cost.csv")
def prefill_statistics(path):
    """docs/eviction.md: best prefill time per press against uncompressed and, at the longest context, StreamingLLM."""
    rows = read_csv(path)
    contexts = sorted({int(r["context"]) for r in rows})
    names = dict(EVICTION_NAMES, streaming_llm="StreamingLLM (no statistics)")
    last = f"{contexts[-1] // 1024}K"
    lines = ["| method | " + " | ".join(f"{c // 1024}K: vs uncompressed" for c in contexts)
             + f" | {last}: vs StreamingLLM |", "|---|" + "---|" * (len(contexts) + 1)]
    for press in dict.fromkeys(r["press"] for r in rows):
        by_context = {int(r["context"]): r for r in rows if r["press"] == press}
        if set(by_context) != set(contexts):
            raise SourceError(f"prefill_statistics_cost.csv: {press} is not measured at every context")
        cells = []
        for c in contexts:
            r = by_context[c]
            seconds = float(r["prefill_s_best"])
            cells.append(r["vs_uncompressed"] + (f" ({_r(seconds, 2 if seconds < 10 else 1)} s)" if press == "none" else ""))
        cells.append(by_context[contexts[-1]]["vs_streaming_llm"])
        lines.append(f"| {_name(names, press, 'EVICTION_NAMES')} | " + " | ".join(cells) + " |")
    return lines


@renderer("press_prefill_cost", "prefill_cost.csv")
def press_prefill_cost(path):
    """docs/eviction.md: every press's prefill against the uncompressed one, alternated pairs (eviction_prefill_cost.sh)."""
    rows = read_csv(path)
    if not rows:
        raise SourceError("prefill_cost.csv has no rows")
    lines = ["| `--press` | setting | prefill vs uncompressed: median (range) | seconds: press / uncompressed | KV kept |",
             "|---|---|---|---|---|"]
    for r in rows:
        # "press ratio=0.5" -> "ratio=0.5"; "press:k=v ratio=0.5" -> "k=v,ratio=0.5"
        setting = r["spec"][len(r["press"]):].strip().lstrip(":").replace(" ratio=", ",ratio=")
        lines.append(f"| `{r['press']}` | `{setting}` | {float(r['ratio_median']):.2f} ({float(r['ratio_min']):.2f}–"
                     f"{float(r['ratio_max']):.2f}) | {r['press_seconds']} / {r['none_seconds']} | "
                     f"{float(r['kept_share']):.2f} |")
    return lines


@renderer("decoding_compression", "decoding_kl.csv")
def decoding_compression(path):
    """docs/eviction.md: compression while decoding against per-step eviction (decoding_compression.sh): KL and
    top-1 from decoding_kl.csv, decode speed and the cache at the end from decoding_speed.csv beside it."""
    kl_rows = read_csv(path)
    speed = {r["method"]: r for r in read_csv(_beside(path, "decoding_speed.csv"))}
    if not kl_rows:
        raise SourceError("decoding_kl.csv has no rows")
    lines = ["| method | KL | top-1 agreement | decode vs uncompressed: median (range) | KV entries at the end / "
             "uncompressed |", "|---|---|---|---|---|"]
    for r in kl_rows:
        s = speed.get(r["method"])
        pace = (f"{float(s['ratio_median']):.2f} ({float(s['ratio_min']):.2f}–{float(s['ratio_max']):.2f})"
                if s else "—")
        entries = _r(int(s["kv_entries_end"]) / int(s["none_kv_entries_end"]), 2) if s else "—"
        lines.append(f"| `{r['spec']}` | {float(r['kl_mean']):.4f} | {float(r['top1_agreement']):.3f} | {pace} | "
                     f"{entries} |")
    return lines


@renderer("lowrank_palu", "palu_matched_memory.csv")
def lowrank_palu(path):
    """docs/lowrank.md: Palu's grouped bases at the matched-memory shares (lowrank_palu_matched_memory.sh)."""
    rows = read_csv(path)
    if not rows:
        raise SourceError("palu_matched_memory.csv has no rows")
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = ["| model, text | target share | " + " | ".join(methods) + " |", "|---|---" + "|---" * len(methods) + "|"]
    for key in dict.fromkeys((r["model"], r["domain"], r["target_share"]) for r in rows):
        cells = {r["method"]: r for r in rows if (r["model"], r["domain"], r["target_share"]) == key}
        lines.append(f"| {key[0]}, {key[1]} | {key[2]} | " + " | ".join(
            f"{float(cells[m]['kl']):.3f} / {float(cells[m]['ppl']):.2f} ({float(cells[m]['kept_share']):.3f})"
            for m in methods) + " |")
    return lines


@renderer("dynamickv_absolute_budgets", "absolute_budgets.csv")
def dynamickv_absolute_budgets(path):
    """docs/papers.md: needle accuracy ± standard error at absolute budgets (dynamickv_absolute_budgets.sh)."""
    rows = read_csv(path)
    budgets = list(dict.fromkeys(r["budget"] for r in rows if r["budget"]))
    if not budgets:
        raise SourceError("absolute_budgets.csv has no budget rows")
    lines = ["| `--press` | " + " | ".join(f"`--budget {b}`" for b in budgets) + " |", "|---" * (len(budgets) + 1) + "|"]
    for press in dict.fromkeys(r["press"] for r in rows if r["budget"]):
        cells = {r["budget"]: r for r in rows if r["press"] == press}
        lines.append(f"| `{press}` | " + " | ".join(
            f"{float(cells[b]['accuracy']):.2f} ± {float(cells[b]['standard_error']):.2f}" for b in budgets) + " |")
    exact = [r for r in rows if r["press"] == "none"]
    if exact:
        lines.append(f"| uncompressed | {float(exact[0]['accuracy']):.2f} (every budget) |" + " |" * (len(budgets) - 1))
    return lines


@renderer("eviction_decode_speedup", "decode_speedup.csv")
def eviction_decode_speedup(path):
    """docs/eviction.md: median decode tok/s and speed-up of decode_speedup_runs.csv's repeats, byte limit, resident KV."""
    speedup = _median_speedups(read_csv(_beside(path, "decode_speedup_runs.csv")), "press", "none")
    rows = read_csv(path)
    base = [r for r in rows if r["press"] == "none"]
    if len(base) != 1:
        raise SourceError("decode_speedup.csv needs one uncompressed ('none') row")
    lines = ["| method | tok/s | vs uncompressed | limit | resident KV |", "|---|---|---|---|---|"]
    for r in rows:
        s = speedup[((), r["press"])]
        _agrees(s, r["decode_speedup"], f"{r['press']}'s speed-up")
        limit = int(base[0]["step_read_bytes"]) / int(r["step_read_bytes"])
        lines.append(f"| {_name(EVICTION_NAMES, r['press'], 'EVICTION_NAMES')} | {_r(r['decode_tok_s'], 1)} | {_r(s, 2)} | "
                     f"{_r(limit, 2)} | {_r(int(r['kv_resident_bytes']) / 1e6)} MB |")
    return lines


@renderer("eviction_decode_interleaved", "decode_interleaved_medians.csv")
def eviction_decode_interleaved(path):
    """docs/eviction.md: caches decoded step by step in turn; median speed-up with the lowest and highest repeat."""
    repeats = {r["repeat"] for r in read_csv(_beside(path, "decode_interleaved.csv"))}
    lines = [f"| method | tok/s | vs uncompressed: median (lowest–highest of {len(repeats)}) | limit |",
             "|---|---|---|---|"]
    for r in read_csv(path):
        spread = "" if r["press"] == "none" else f" ({r['lowest']}–{r['highest']})"
        lines.append(f"| {_name(EVICTION_NAMES, r['press'], 'EVICTION_NAMES')} | {_r(r['decode_tok_s'], 1)} | "
                     f"{r['decode_speedup']}{spread} | {r['limit']} |")
    return lines


@renderer("eviction_op_counts", "decode_op_counts.csv")
def eviction_op_counts(path):
    """docs/eviction.md: ATen operator calls per decode step per press (recipes/decode_op_counts.sh)."""
    rows = read_csv(path)
    layers = {round(float(r["extra_per_step"]) / float(r["extra_per_layer"])) for r in rows if float(r["extra_per_layer"])}
    if len(layers) != 1:
        raise SourceError(f"decode_op_counts.csv: extra_per_step / extra_per_layer gives {sorted(layers)} layers")
    lines = [f"| method | ATen calls per decode step | added per layer ({layers.pop()} layers) |", "|---|---|---|"]
    for r in rows:
        per_layer = float(r["extra_per_layer"])
        lines.append(f"| {_name(EVICTION_NAMES, r['press'], 'EVICTION_NAMES')} | {_r(r['aten_ops_per_step'])} | "
                     f"{_r(per_layer, 1) if per_layer else '0'} |")
    return lines


# recipes/lowrank_stories260k.sh's rows that docs/lowrank.md shows: fixed rank and adaptive gates at about
# the same memory, (method, rank) or (method, alpha, tau).
LOWRANK_HEADLINE = (("fixed", 16), ("adaptive", 4, 0.1), ("fixed", 10), ("adaptive", 4, 0.5), ("fixed", 6),
                    ("adaptive", 64, 0.3))


@renderer("lowrank_headline", "kl_stories260k.jsonl")
def lowrank_headline(path):
    """docs/lowrank.md: memory, KL and ppl of fixed and adaptive ranks, and of SnapKV over gates (snapkv_lowrank_*.jsonl)."""
    runs = {}
    for r in read_jsonl(path):
        runs[(r["method"], r["rank"]) if r["method"] == "fixed" else (r["method"], r["alpha"], r["tau"])] = r
    rows = []
    for key in LOWRANK_HEADLINE:
        if key not in runs:
            raise SourceError(f"kl_stories260k.jsonl has no run {key}")
        label = f"fixed rank {key[1]}" if key[0] == "fixed" else f"adaptive α={key[1]}, τ={key[2]:g}"
        rows.append((label, runs[key]))
    for r in read_jsonl(_beside(path, "snapkv_lowrank_stories260k.jsonl")):
        gates = re.search(r"ratio=(\S+) lowrank=\S*gates_(\d+)\.safetensors$", r["method"])
        if gates:
            rows.append((f"SnapKV {gates.group(1)} + adaptive α={gates.group(2)}", r))
    if len(rows) != len(LOWRANK_HEADLINE) + 1:
        raise SourceError("snapkv_lowrank_stories260k.jsonl holds no single run of SnapKV over gates_<alpha>.safetensors")
    lines = ["| method | memory | KL | ppl |", "|---|---|---|---|"]
    for label, r in rows:
        lines.append(f"| {label} | {_r(r['memory_fraction'], 3)} | {_r(r['kl'], 3)} | {_r(r['ppl_compressed'], 2)} |")
    return lines


LOWRANK_CACHES = {"none": "full cache", "pre-rope d_kv/4": "rank d_kv/4, pre-RoPE keys (0.25)",
                  "rotated d_kv/4": "rank d_kv/4, rotated keys (0.25)",
                  "rotated d_kv/8": "rank d_kv/8, rotated keys (0.125)",
                  "adaptive pre-rope": "adaptive, pre-RoPE keys (0.25)", "adaptive rotated": "adaptive, rotated keys (0.25)",
                  "adaptive rotated f16 gate": "adaptive, rotated keys, `gate=f16` (0.25)"}


@renderer("lowrank_decode_speed", "decode_speed.csv")
def lowrank_decode_speed(path):
    """docs/lowrank.md: median decode tok/s and ratio to the full cache of decode_speed_runs.csv's repeats, limit, KV."""
    speedup = _median_speedups(read_csv(_beside(path, "decode_speed_runs.csv")), "cache", "none",
                               group=lambda r: int(r["context"]))
    rows = read_csv(path)
    contexts = sorted({int(r["context"]) for r in rows})
    by = {(int(r["context"]), r["cache"]): r for r in rows}
    header = "| cache (kept share of the KV payload) |"
    for c in contexts:
        header += f" {c // 1024}K decode tok/s | vs full cache | limit |"
    lines = [header + f" KV at {contexts[-1] // 1024}K |", "|---|" + "---|---|---|" * len(contexts) + "---|"]
    for cache in dict.fromkeys(r["cache"] for r in rows):
        cells = []
        for c in contexts:
            if (c, cache) not in by or (c, "none") not in by:
                raise SourceError(f"decode_speed.csv has no {cache} or full-cache row at {c}")
            r = by[(c, cache)]
            _agrees(speedup[(c, cache)], r["decode_vs_full"], f"{cache} at {c}")
            limit = int(by[(c, "none")]["step_read_bytes"]) / int(r["step_read_bytes"])
            cells += [_r(r["decode_tok_s"], 1), _r(speedup[(c, cache)], 2) + "×", _r(limit, 2)]
        cells.append(_r(int(by[(contexts[-1], cache)]["kv_resident_bytes"]) / 2**20) + " MiB")
        lines.append(f"| {_name(LOWRANK_CACHES, cache, 'LOWRANK_CACHES')} | " + " | ".join(cells) + " |")
    return lines


# Caches of one row must count the same calls, with and without the folded gates.
LOWRANK_OP_ROWS = ((("none",), "full cache"), (("pre-rope d_kv/4",), "rank d_kv/4, pre-RoPE keys"),
                   (("rotated d_kv/4", "rotated d_kv/8"), "rank d_kv/4 or d_kv/8, rotated keys"),
                   (("adaptive pre-rope",), "adaptive, pre-RoPE keys"), (("adaptive rotated",), "adaptive, rotated keys"))


@renderer("lowrank_op_counts", "decode_op_counts.csv")
def lowrank_op_counts(path):
    """docs/lowrank.md: ATen calls per decode step per cache, and without folded gates (..._unfolded_gates.csv)."""
    counts = []
    for p in (path, _beside(path, "decode_op_counts_unfolded_gates.csv")):
        counts.append({r["cache"]: (_r(r["aten_ops_per_step"]), _r(r["extra_per_layer"])) for r in read_csv(p)})
    lines = ["| cache | ATen calls per decode step | added per layer | without: per step / per layer |", "|---|---|---|---|"]
    for caches, label in LOWRANK_OP_ROWS:
        cells = set()
        for cache in caches:
            if any(cache not in c for c in counts):
                raise SourceError(f"decode_op_counts.csv or decode_op_counts_unfolded_gates.csv has no row {cache}")
            cells.add((counts[0][cache], counts[1][cache]))
        if len(cells) != 1:
            raise SourceError(f"{' and '.join(caches)} share a row but count different calls")
        (step, layer), (step_u, layer_u) = cells.pop()
        lines.append(f"| {label} | {step} | {layer} | {step_u} / {layer_u} |")
    return lines


@renderer("lowrank_training_scale", "training_scale.json")
def lowrank_training_scale(path):
    """docs/lowrank.md: held-out KL and kept share of gates trained 1,500 steps (recipes/lowrank_training_scale.sh)."""
    curves = read_json(path)["curves"]
    kl_steps, kept_steps = (100, 300, 1000, 1500), (300, 1500)
    lines = [f"| model, loss | held-out KL at step {' / '.join(map(str, kl_steps))} | "
             f"kept share at {' / '.join(map(str, kept_steps))} |", "|---|---|---|"]
    for model in dict.fromkeys(k.split("/")[0] for k in curves):
        for loss in ("kl", "ce"):
            at = {e["step"]: e for e in curves.get(f"{model}/{loss}", [])}
            if any(s not in at for s in kl_steps + kept_steps):
                raise SourceError(f"training_scale.json: {model}/{loss} is not evaluated at steps {kl_steps}")
            lines.append(f"| {model}, `--loss {loss}` | {' / '.join(_r(at[s]['heldout_kl'], 3) for s in kl_steps)} | "
                         f"{' / '.join(_r(at[s]['retain_hard'], 3) for s in kept_steps)} |")
    return lines


@renderer("retrieval_long_decode", "summary.json")
def retrieval_long_decode(path):
    """docs/retrieval.md: recall, KL, clusters and reads per strategy of kvc-cluster replay's summary."""
    lines = ["| strategy | attention recall | KL | clusters | mean variance | MiB read | read ops | mean read (B) |",
             "|---|---|---|---|---|---|---|---|"]
    for s in read_json(path)["strategies"]:
        exact = s["strategy"] == "none"
        cells = [s["name"] + (" (exact top entries)" if exact else ""), _r(s["mean_recall"], 3), _r(s["mean_kl"], 3),
                 "—" if exact else str(s["final_clusters"]), "—" if exact else _r(s["final_mean_variance"], 1),
                 _r(s["bytes_read"] / 2**20), str(s["read_ops"]), _r(s["mean_read_bytes"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


@renderer("retrieval_cost", "retrieval_cost.txt")
def retrieval_cost(path):
    """docs/leaderboard.md: dense cache against each retrieval spec, from the kvc-generate reports of
    recipes/retrieval_cost_gemma3.sh ("== spec" then the tool's stderr)."""
    runs, spec = [], None
    for line in read_text(path).splitlines():
        if line.startswith("== "):
            spec = line[3:].strip()
            runs.append({"spec": spec})
            continue
        m = re.search(r"(\d+) prompt tokens at [\d.]+ tok/s, (\d+) generated at ([\d.]+) tok/s, .*after prefill: "
                      r"([\d.]+) KiB", line)
        if m:
            runs[-1].update(prompt=int(m[1]), generated=int(m[2]), tok_s=float(m[3]), after_prefill_kib=float(m[4]))
        m = re.search(r"read ([\d.]+) KiB in \d+ ops .*wrote ([\d.]+) KiB, .*store ([\d.]+) KiB", line)
        if m:
            runs[-1].update(read_kib=float(m[1]), wrote_kib=float(m[2]), store_kib=float(m[3]))
    if not runs or runs[0]["spec"] != "none":
        raise ValueError("the first run must be the dense cache (== none)")
    (prompt,), (generated,) = {r["prompt"] for r in runs}, {r["generated"] for r in runs}
    lines = [f"| {prompt:,}-token prompt, {generated} new tokens, 1 thread | decode tok/s | RAM after the prompt "
             "| read per new token | store file |", "|---|---|---|---|---|"]
    for r in runs:
        dense = r["spec"] == "none"
        cells = ["dense cache" if dense else f"`{r['spec']}`", _r(r["tok_s"], 1),
                 _r(r["after_prefill_kib"], 0, grouping=True) + " KiB",
                 "—" if dense else _r(r["read_kib"] / generated / 1024, 1) + " MiB",
                 "—" if dense else f"{_r(r['store_kib'] / 1024)} MiB ({_r(r['wrote_kib'] / 1024)} MiB written)"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


@renderer("retrieval_in_evaluations", "needle_exact.json")
def retrieval_in_evaluations(path):
    """docs/retrieval.md: needle accuracy and KL of retrieval against SnapKV on kvc-micro-lm, from the kvc-eval
    --json outputs of the doc's commands (this file and needle_*/kl_*.json beside it)."""
    exact = read_json(path)
    lines = [f"| {exact['lengths'][0]}-token prompt | needle accuracy ({exact['samples']} samples) "
             "| KL (4 windows of 512, second half decoded) | KV in RAM after the prompt / exact cache |",
             "|---|---|---|---|",
             f"| exact cache | {_r(exact['accuracy'], 2)} | 0 | 1 |"]
    rows = (("retrieval", "`--retrieval adaptive:budget=64`"), ("static", "`--retrieval static:budget=64`"),
            ("local", "`--retrieval local:budget=64`"),
            ("local_cosine", "`--retrieval local:metric=cosine,budget=64`"), ("pq", "`--retrieval pq:budget=64`"),
            ("snapkv", "`--press snapkv --budget 64`"))
    for name, label in rows:
        needle, kl = read_json(_beside(path, f"needle_{name}.json")), read_json(_beside(path, f"kl_{name}.json"))
        lines.append(f"| {label} | {_r(needle['accuracy'], 2)} | {_r(kl['kl'], 3)} "
                     f"(top-1 agreement {_r(kl['top1_agreement'], 3)}) | "
                     f"{_r(kl['compressed_ram_bytes'] / kl['reference_kv_bytes'], 2)} |")
    return lines


@renderer("retrieval_at_scale", "at_scale.csv")
def retrieval_at_scale(path):
    """docs/retrieval.md: full cache against adaptive retrieval and adaptive:tails=storage per prompt length."""
    by = {(int(r["context"]), r["cache"]): r for r in read_csv(path)}
    lines = ["| prompt | full cache: prefill / decode | adaptive: prefill (clustering) | decode vs full | "
             "choosing clusters per step | placing the new entry per step | read per step | RAM held vs full cache | "
             "`tails=storage`: decode vs full, read per step, RAM held |",
             "|---|---|---|---|---|---|---|---|---|"]

    def ms(v):
        return _r(v, 2 if float(v) < 1 else 1) + " ms"

    for c in sorted({c for c, _ in by}):
        if any((c, k) not in by for k in ("full", "adaptive", "adaptive:tails=storage")):
            raise SourceError(f"at_scale.csv: {c} lacks a full, adaptive or adaptive:tails=storage row")
        f, a, t = by[(c, "full")], by[(c, "adaptive")], by[(c, "adaptive:tails=storage")]
        full_mb = int(f["resident_bytes"]) / 1e6
        full_mb = _r(full_mb, 1 if full_mb < 100 else 0)

        def speed(r):
            return _r(float(r["decode_tok_s"]) / float(f["decode_tok_s"]), 2) + "×"

        def read(r):
            return f"{_r(int(r['read_bytes_per_step']) / 1024)} KiB in {_r(r['reads_per_step'])} reads"

        def held(r, of=""):
            share = _r(100 * int(r["resident_bytes"]) / int(f["resident_bytes"]), 1)
            return f"{_r(int(r['resident_bytes']) / 1e6, 1)} MB{of} ({share}%)"

        lines.append(f"| {c // 1024}K | {_r(f['prefill_s'], 1)} s / {_r(f['decode_tok_s'], 1)} tok/s | "
                     f"{_r(a['prefill_s'], 1)} s ({_r(a['cluster_s'], 1)} s) | {speed(a)} | {ms(a['choose_ms_per_step'])} | "
                     f"{ms(a['place_ms_per_step'])} | {read(a)} | {held(a, f' of {full_mb} MB')} | "
                     f"{speed(t)}, {read(t)}, {held(t)} |")
    return lines


@renderer("cuda_bench", "bench_125m.json")
def cuda_bench(path):
    """docs/cuda.md: kvc-bench on the 134M model (this file) and the 7B-shaped layer (bench_7b1.json beside)."""
    small, layer = read_json(path)["runs"], read_json(_beside(path, "bench_7b1.json"))["runs"]
    if [r["context"] for r in small] != [r["context"] for r in layer]:
        raise SourceError("bench_125m.json and bench_7b1.json were measured at different contexts")
    lines = ["| context | 134M: prefill tok/s | % of GEMM peak | decode tok/s | % of bandwidth bound | "
             "7B layer: prefill tok/s | % of peak | decode tok/s | % of bound |", "|---|---|---|---|---|---|---|---|---|"]
    for s, l in zip(small, layer):
        cells = [_r(s["prefill_tokens_per_second"], 0, True), _r(100 * s["prefill_fraction_of_gemm_peak"], 1) + "%",
                 _r(s["decode_tokens_per_second"], 1), _r(100 * s["decode_fraction_of_bound"], 1) + "%",
                 _r(l["prefill_tokens_per_second"], 0, True), _r(100 * l["prefill_fraction_of_gemm_peak"], 1) + "%",
                 _r(l["decode_tokens_per_second"], 0, True), _r(100 * l["decode_fraction_of_bound"], 1) + "%"]
        lines.append(f"| {s['context']} | " + " | ".join(cells) + " |")
    return lines


# scripts/bench_cuda.sh's kvc-generate runs at 32K: (label, run of the 134M shape, of the 7B layer), each
# run's file gen32k_<model>_<run>.json.
CUDA_COMPRESSED_ROWS = (("none", "none", "none"), ("SnapKV, ratio 0.9", "snapkv", "snapkv"),
                        ("StreamingLLM, ratio 0.9", "streaming_llm", "streaming_llm"),
                        ("low-rank d_kv/4, pre-RoPE keys", "lowrank_r192", "lowrank_r1024"),
                        ("low-rank d_kv/8, pre-RoPE keys", "lowrank_r96", "lowrank_r512"),
                        ("low-rank d_kv/4, rotated keys", "lowrank_rotated_r192", "lowrank_rotated_r1024"),
                        ("low-rank d_kv/8, rotated keys", "lowrank_rotated_r96", "lowrank_rotated_r512"))


@renderer("cuda_compressed_decode", "gen32k_125m_none.json")
def cuda_compressed_decode(path):
    """docs/cuda.md: decode tok/s and KV of each cache at 32K, from the gen32k_*.json beside; – where a run has none."""
    base = [read_json(path), read_json(_beside(path, "gen32k_7b1_none.json"))]
    lines = ["| cache | 134M shape: decode tok/s | vs none | KV at the end | 7B layer: decode tok/s | vs none | "
             "KV at the end |", "|---|---|---|---|---|---|---|"]
    for label, *runs in CUDA_COMPRESSED_ROWS:
        cells = []
        for b, model, run in zip(base, ("125m", "7b1"), runs):
            other = os.path.join(os.path.dirname(path), f"gen32k_{model}_{run}.json")
            if not os.path.isfile(other):
                cells += ["–"] * 3
                continue
            r = read_json(other)
            cells += [_r(r["decode_tokens_per_second"], 1),
                      _r(r["decode_tokens_per_second"] / b["decode_tokens_per_second"], 2) + "×",
                      _r(r["kv_resident_bytes"] / 2**20) + " MiB"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


@renderer("cuda_retrieval", "gen32k_7b1_cuda_none.log")
def cuda_retrieval(path):
    """docs/cuda.md: full cache against --retrieval adaptive at 32K, GPU (this file and ..._cuda_retrieval_adaptive.log
    beside) and CPU (..._cpu_none.log, ..._cpu_retrieval_adaptive.log), from kvc-generate's reports."""
    lines = ["| device, cache | prefill tok/s | decode tok/s | cache held | written to storage |", "|---|---|---|---|---|"]
    for device in ("cuda", "cpu"):
        for cache in ("none", "retrieval_adaptive"):
            text = read_text(_beside(path, f"gen32k_7b1_{device}_{cache}.log"))
            m = re.search(r"prompt tokens at ([\d.]+) tok/s, \d+ generated at ([\d.]+) tok/s, KV cache ([\d.]+) KiB "
                          r"resident at the end", text)
            prefill, decode, held_kib = float(m[1]), float(m[2]), float(m[3])
            where = "GPU memory" if device == "cuda" and cache == "none" else "RAM"
            cells = [("GPU" if device == "cuda" else "CPU") + ", " + ("full" if cache == "none" else "`--retrieval adaptive`"),
                     _r(prefill, 0, grouping=True), _r(decode, 1), f"{_r(held_kib / 1024, 0, grouping=True)} MiB of {where}",
                     "–"]
            if cache != "none":
                r = re.search(r"wrote ([\d.]+) KiB, .*prompt clustered in ([\d.]+) s", text)
                cells[1] += f" ({_r(float(r[2]), 1)} s clustering)"
                cells[4] = f"{_r(float(r[1]) / 1024, 0, grouping=True)} MiB"
            lines.append("| " + " | ".join(cells) + " |")
    return lines


@renderer("bench_cpu", "cpu.json")
def bench_cpu(path):
    """docs/performance.md: kvc-bench on the CPU against the machine's limits (recipes/bench_cpu.sh)."""
    lines = ["| context | prefill tok/s | prefill GFLOP/s | % of GEMM peak | decode tok/s | bound tok/s | % of bound | "
             "% of read bound | KV cache |", "|---|---|---|---|---|---|---|---|---|"]
    for r in read_json(path)["runs"]:
        lines.append(f"| {r['context']} | {_r(r['prefill_tokens_per_second'], 1)} | {_r(r['prefill_gflops'], 1)} | "
                     f"{_r(100 * r['prefill_fraction_of_gemm_peak'], 1)}% | {_r(r['decode_tokens_per_second'], 1)} | "
                     f"{_r(r['decode_bound_tokens_per_second'], 1)} | {_r(100 * r['decode_fraction_of_bound'], 1)}% | "
                     f"{_r(100 * r['decode_fraction_of_read_bound'], 1)}% | {_r(r['kv_resident_bytes'] / 1e6, 1)} MB |")
    return lines


# (label, label in the spin-wait rows) per model of recipes/threads_busy_neighbour.sh.
THREAD_MODELS = {"stories260K": ("stories260K", "stories260K"), "llama-125m": ("134M (kvc-bench, 512)", "134M")}


@renderer("threads_busy_neighbour", "busy_neighbour.csv")
def threads_busy_neighbour(path):
    """docs/performance.md: median decode tok/s and ratio to -t 1 in the same repeat, idle and busy; spin-wait build last."""
    lines = ["| model | setting | no neighbour: tok/s | vs `-t 1` | busy neighbour: tok/s | vs `-t 1` |",
             "|---|---|---|---|---|---|"]
    for p, spin in ((path, False), (_beside(path, "busy_neighbour_spin_wait_default.csv"), True)):
        runs = read_csv(p)
        ratio = _median_speedups(runs, "setting", "-t 1", group=lambda r: (r["model"], r["condition"]))
        for model in dict.fromkeys(r["model"] for r in runs):
            settings = sorted({r["setting"] for r in runs} - {"-t 1"}, key=lambda s: (s != "default", s))
            for setting in ("default",) if spin else settings:
                cells = []
                for condition in ("idle", "busy"):
                    tok = statistics.median(float(r["decode_tok_s"]) for r in runs
                                            if (r["model"], r["setting"], r["condition"]) == (model, setting, condition))
                    cells += [_r(tok, 0 if tok >= 100 else 1), _r(ratio[((model, condition), setting)], 2)]
                label, short = _name(THREAD_MODELS, model, "THREAD_MODELS")
                if spin:
                    label, setting = f"*spin-wait default:* {short}", "default (2 threads)"
                elif setting != "default":
                    setting = f"`{setting}`"
                lines.append(f"| {label} | {setting} | " + " | ".join(cells) + " |")
    return lines


# recipes/ruler_uncompressed.sh's models: (folder under data/results/ruler, column label).
RULER_MODELS = (("gemma3-270m", "Gemma 3 270M"), ("kvc-micro-lm", "kvc-micro-lm"), ("kvc-tiny-lm", "kvc-tiny-lm"),
                ("stories260K", "stories260K"))


@renderer("ruler_uncompressed", "tasks.csv")
def ruler_uncompressed(path):
    """docs/evaluation.md: RULER score per task (×100) of each model's ../<model>/tasks.csv; — where not run."""
    if os.path.basename(os.path.dirname(path)) != RULER_MODELS[0][0]:
        raise SourceError(f"ruler_uncompressed reads ruler/{RULER_MODELS[0][0]}/tasks.csv and the other models' beside it")
    models = []
    for folder, label in RULER_MODELS:
        rows = read_csv(_beside(path, f"../{folder}/tasks.csv"))
        lengths = {r["length"] for r in rows}
        if len(lengths) != 1:
            raise SourceError(f"ruler/{folder}/tasks.csv holds several lengths")
        models.append((f"{label}, {lengths.pop()}", {r["task"]: float(r["score"]) for r in rows}))
    tasks = list(dict.fromkeys(t for _, scores in models for t in scores))
    lines = ["| task | " + " | ".join(label for label, _ in models) + " |", "|---|" + "---|" * len(models)]
    for task in tasks:
        lines.append(f"| {task} | " + " | ".join(_r(100 * s[task], 1) if task in s else "—" for _, s in models) + " |")
    lines.append(f"| mean of the {len(tasks)} | " + " | ".join(
        _r(100 * sum(s.values()) / len(tasks), 1) if len(s) == len(tasks) else "—" for _, s in models) + " |")
    return lines


GEMMA3_NEEDLE_TEMPLATES = ("secret", "plain", "passkey")


@renderer("gemma3_needle_templates", "needle_grid.json")
def gemma3_needle_templates(path):
    """docs/evaluation.md: needle accuracy per prompt length and overall for each template, from ../needle_<template>/."""
    if os.path.basename(os.path.dirname(path)) != f"needle_{GEMMA3_NEEDLE_TEMPLATES[0]}":
        raise SourceError(f"gemma3_needle_templates reads needle_{GEMMA3_NEEDLE_TEMPLATES[0]}/needle_grid.json "
                          "and the other templates' beside it")
    rows = []
    for template in GEMMA3_NEEDLE_TEMPLATES:
        grid = read_json(_beside(path, f"../needle_{template}/needle_grid.json"))
        scores = {}
        for cell in grid["cells"]:
            scores.setdefault(cell["length"], []).extend(s["score"] for s in cell["samples"])
        every = [s for v in scores.values() for s in v]
        if abs(sum(every) / len(every) - grid["accuracy"]) > 1e-9:
            raise SourceError(f"needle_{template}/needle_grid.json: its cells do not give its accuracy")
        rows.append((template, {n: sum(v) / len(v) for n, v in sorted(scores.items())}, grid["accuracy"]))
    lengths = list(rows[0][1])
    if any(list(by_length) != lengths for _, by_length, _ in rows):
        raise SourceError("the needle grids were measured at different lengths")
    lines = ["| template | " + " | ".join(map(str, lengths)) + " | all |", "|---|" + "---|" * (len(lengths) + 1)]
    for template, by_length, overall in rows:
        cells = [str(int(v)) if v in (0, 1) else _r(v, 2) for v in by_length.values()]
        lines.append(f"| {template} | " + " | ".join(cells) + f" | {_r(overall, 2)} |")
    return lines


def render_data(path, selector, source):
    if "render" not in selector:
        raise SourceError(f"a .json/.jsonl/.csv/.txt/.log source needs render=NAME (one of: {', '.join(sorted(RENDERERS))})")
    if set(selector) != {"render"}:
        raise SourceError("render= takes no other selector")
    name = selector["render"]
    if name not in RENDERERS:
        raise SourceError(f"no renderer '{name}' (known: {', '.join(sorted(RENDERERS))})")
    fn, source_name = RENDERERS[name]
    if re.sub(r"\.gz$", "", os.path.basename(path)) != source_name:
        raise SourceError(f"renderer '{name}' reads {source_name}, not {os.path.basename(path)}")
    try:
        return fn(path)
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as e:
        raise SourceError(f"renderer '{name}' cannot read {source}: {type(e).__name__}: {e}")


def render(root, source, selector_text):
    selector = parse_selector(selector_text)
    norm = os.path.normpath(source)
    if os.path.isabs(source) or not (norm == RESULTS or norm.startswith(RESULTS + os.sep)):
        raise SourceError(f"source {source} is not a path under {RESULTS}/")
    path = os.path.join(root, norm)
    if not os.path.isfile(path):
        raise SourceError(f"source {source} does not exist")
    base = re.sub(r"\.gz$", "", path)
    if base.endswith(".md"):
        return render_markdown(path, selector, source)
    if base.endswith((".json", ".jsonl", ".csv", ".txt", ".log")):
        return render_data(path, selector, source)
    raise SourceError(f"source {source} is neither .md, .json, .jsonl, .csv, .txt nor .log")


# ---------------------------------------------------------------------------------------------------
# Documents.

def documents(root):
    files = [os.path.join(root, "README.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    files += sorted(glob.glob(os.path.join(root, "apps", "*", "README.md")))
    return [f for f in files if os.path.isfile(f)]


def blocks(lines):
    """(start, end, source, selector) per marker pair: lines[start] is the marker, lines[end] its end."""
    found, errors, open_at, fenced = [], [], None, False
    for i, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        m = START.match(line)
        if m:
            if open_at is not None:
                errors.append((open_at, "table marker without '<!-- end table -->' before the next marker"))
            open_at = i
            current = (m.group("source"), m.group("selector"))
            continue
        if line.startswith("<!-- table:"):
            errors.append((i, "cannot read the marker (expected '<!-- table: SOURCE [SELECTOR] -->')"))
        elif END.match(line):
            if open_at is None:
                errors.append((i, "'<!-- end table -->' without a table marker"))
            else:
                found.append((open_at, i) + current)
                open_at = None
    if open_at is not None:
        errors.append((open_at, "table marker without '<!-- end table -->'"))
    return found, errors


def main(argv=None):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="list the stale tables and exit 1 if any (default)")
    mode.add_argument("--write", action="store_true", help="rewrite the stale tables from their sources")
    mode.add_argument("--list", action="store_true", help="list the renderers")
    ap.add_argument("--root", default=here, help="repository root (default: %(default)s)")
    args = ap.parse_args(argv)
    if args.list:
        for name, (fn, source_name) in sorted(RENDERERS.items()):
            print(f"{name} ({source_name}): {fn.__doc__}")
        return 0
    root = os.path.abspath(args.root)
    if not os.path.isdir(os.path.join(root, RESULTS)):
        print(f"docs_tables.py: {root} has no {RESULTS}/ folder", file=sys.stderr)
        return 2

    problems, stale, fresh, rewritten = [], 0, 0, []
    for doc_index, doc in enumerate(documents(root)):
        rel = os.path.relpath(doc, root)
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        lines = text.split("\n")
        found, errors = blocks(lines)
        for i, message in errors:
            problems.append(((doc_index, i), f"{rel}:{i + 1}: {message}"))
        replacements = []
        for start, end, source, selector in found:
            label = source + (f" {selector}" if selector else "")
            try:
                want = render(root, source, selector)
            except SourceError as e:
                problems.append(((doc_index, start), f"{rel}:{start + 1}: {e}"))
                continue
            have = lines[start + 1:end]
            if have == want:
                fresh += 1
                continue
            stale += 1
            replacements.append((start, end, want))
            for k in range(max(len(have), len(want))):
                h = have[k] if k < len(have) else None
                w = want[k] if k < len(want) else None
                if h != w:
                    break
            where = f"{rel}:{start + 2 + k}"
            if h is None:
                detail = f"the source has more lines: {w!r}"
            elif w is None:
                detail = f"the source has fewer lines: {h!r}"
            else:
                detail = f"doc {h!r}, source {w!r}"
            if args.write:
                rewritten.append(f"{rel}:{start + 1}: stale table rewritten from {label}; first difference at {where}: {detail}")
            else:
                problems.append(((doc_index, start),
                                 f"{rel}:{start + 1}: stale table differs from {label}; first difference at {where}: {detail}"))
        if args.write and replacements:
            for start, end, want in reversed(replacements):
                lines[start + 1:end] = want
            directory = os.path.dirname(doc)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(doc) + ".tmp.")
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                    f.write("\n".join(lines))
                os.chmod(tmp, os.stat(doc).st_mode & 0o7777)
                os.replace(tmp, doc)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise

    for line in rewritten:
        print(line)
    for _, line in sorted(problems):
        print(line, file=sys.stderr)
    if problems:
        if args.write:
            print(f"docs_tables.py: {len(problems)} marker(s) with an error, left as they are", file=sys.stderr)
        else:
            print(f"docs_tables.py: {len(problems)} stale or broken table(s); `python3 scripts/docs_tables.py --write` "
                  f"regenerates stale tables from data/results", file=sys.stderr)
        return 1
    total = fresh + stale
    if args.write:
        print(f"docs_tables.py: {total} generated table(s); {stale} rewritten, {fresh} already matched their sources")
    else:
        print(f"docs_tables.py: {total} generated table(s), all match their sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
