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
  - SOURCE is a .json or .csv file (optionally .gz): `render=NAME` names one of the renderers below,
    which computes the table from the file (`--list` prints them).

  scripts/docs_tables.py [--check]      exit 1 and list every block that differs from its source
  scripts/docs_tables.py --write        rewrite those blocks in place from their sources
  scripts/docs_tables.py --root DIR     the repository root to scan (default: this script's repository)

A marker whose source is missing, a selector that selects nothing and an unknown renderer are errors
in both modes. Python 3 standard library only.
"""
import argparse
import csv
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
        raise SourceError("render= applies to .json/.csv sources; a .md source takes table= and rows=")
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
# Renderers: tables whose shape is the document's own, computed from a .json or .csv result.

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


def render_data(path, selector, source):
    if "render" not in selector:
        raise SourceError(f"a .json/.csv source needs render=NAME (one of: {', '.join(sorted(RENDERERS))})")
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
    if base.endswith(".json") or base.endswith(".csv"):
        return render_data(path, selector, source)
    raise SourceError(f"source {source} is neither .md, .json nor .csv")


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
