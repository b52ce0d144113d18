#!/usr/bin/env python3
"""One table and one plot from several kvc-eval sweeps. Table rows are methods, columns ratios, cells the
mean score over the samples ± its standard error (ppl and kl: KL / perplexity), with the cache's
measured share per ratio; rows without
a ratio (low-rank and retrieval caches, whose memory their spec sets) follow with their measured share.
The plot draws score against the measured share of the uncompressed cache kept in RAM (a retrieval
cache's entries are on storage: its share is the RAM it holds), one line per method,
averaged over the tasks given (gnuplot; skipped when it is not installed).
Usage: scripts/leaderboard_table.py OUT TASK [TASK ...]
  reads OUT/TASK/results.jsonl (or results.jsonl.gz, the form the repository commits), writes
  OUT/leaderboard.png (and .dat, .gp) and prints the tables."""
import gzip
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


def results_file(folder):
    """A sweep folder's results.jsonl, else its gzipped copy (which need not exist)."""
    plain = folder / "results.jsonl"
    return plain if plain.exists() else folder / "results.jsonl.gz"


def cells(path):
    out = {}
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        for line in f:
            rec = json.loads(line)
            out[(rec["method"], rec["ratio"])] = rec["result"]
    return out


def mean_se(scores):
    n = len(scores)
    mean = sum(scores) / n
    if n < 2:
        return mean, float("nan"), n
    var = sum((s - mean) ** 2 for s in scores) / (n - 1)
    return mean, math.sqrt(var / n), n


def label(method):
    # "snapkv+lowrank/DIR/bases.safetensors:ranks=128" -> "snapkv + lowrank bases.safetensors:ranks=128",
    # "snapkv+cache/q8_0" -> "snapkv + cache q8_0": an artifact's file name says enough.
    text = re.sub(r"(lowrank|retrieval|cache)/", r"\1 ", method).replace("+", " + ")
    return re.sub(r"\S*/([^/\s:]+\.safetensors)", r"\1", text)


def score(res):
    return mean_se([s["score"] for s in res["samples"]])


def is_text(c):
    """ppl and kl cells score a text window by window: one number per cell, lower is better."""
    return all("samples" not in res for res in c.values())


def text_cell(res):
    return f"{res['kl']:.3f} / {res['ppl_compressed']:.2f}"


def kept(res, full):
    """The bytes the cache holds in RAM as a share of the uncompressed cache's (which may itself hold less
    than every layer's full prompt: sliding-window layers keep their window). For a cache in RAM that is
    its payload; a retrieval cache keeps every entry on storage and holds its sinks, window, buffers
    and centroids (ram_ratio; results without it come from caches in RAM)."""
    return (1.0 - res.get("ram_ratio", res["compression_ratio"])) / full


def table(task, c):
    lines = []
    ratios = sorted({r for (_, r) in c if r > 0})
    methods = list(dict.fromkeys(m for (m, _) in c))
    base = c.get(("none", 0.0))
    n = len(base.get("samples", [])) if base else 0
    full = 1.0 - (base["compression_ratio"] if base else 0.0)
    text = is_text(c)
    if text:
        windows = base["windows"] if base else 0
        chunk = base.get("chunk", 0) if base else 0
        fed = "one token a pass" if chunk == 1 else f"{chunk} tokens a pass"
        lines.append(f"### {task} (KL from the uncompressed model / perplexity; {windows} windows, first half "
                     f"compressed, second half scored, {fed})\n")
        if base:
            lines.append(f"uncompressed: perplexity {base['ppl_reference']:.2f}\n")
    else:
        lines.append(f"### {task} ({n} samples per cell; mean ± standard error)\n")
        if base:
            m, se, _ = score(base)
            lines.append(f"uncompressed: {m:.3f} ± {se:.3f}\n")
    cell = text_cell if text else (lambda res: "{:.2f} ± {:.2f}".format(*score(res)[:2]))
    if ratios:
        lines += ratio_table(c, methods, ratios, cell, full)
    own = [m for m in methods if m != "none" and (m, 0.0) in c]
    if own:
        lines.append("| cache at its own memory | score | cache kept vs uncompressed (in RAM) |")
        lines.append("|---|---|---|")
        for method in own:
            res = c[(method, 0.0)]
            lines.append(f"| {label(method)} | {cell(res)} | {kept(res, full):.3f} |")
        lines.append("")
    return "\n".join(lines)


def ratio_table(c, methods, ratios, cell, full):
    """Rows of methods with a compression ratio, a column per ratio, and the measured share kept."""
    lines = ["| method | " + " | ".join(f"{r}" for r in ratios) + " |"]
    lines.append("|---|" + "---|" * len(ratios))
    measured = {}
    for method in methods:
        if method == "none" or not any((method, r) in c for r in ratios):
            continue
        combined = "+" in method  # a press storing what it keeps low-rank or typed: its share differs from the press's
        row = []
        for r in ratios:
            res = c.get((method, r))
            if res is None:
                row.append("")
                continue
            row.append(cell(res) + (f" ({kept(res, full):.3f})" if combined else ""))
            if not combined:
                measured.setdefault(r, []).append(kept(res, full))
        lines.append(f"| {label(method)} | " + " | ".join(row) + " |")
    lines.append("| *cache kept vs uncompressed (measured bytes)* | " + " | ".join(
        f"{sum(measured[r]) / len(measured[r]):.3f}" if r in measured else "" for r in ratios) + " |\n")
    return lines


def combined(by_task):
    """One table for the sampled tasks: each cell lists every task's mean ± standard error, in task order."""
    by_task = {t: c for t, c in by_task.items() if not is_text(c)}
    if len(by_task) < 2:
        return ""
    tasks = list(by_task)
    ratios = sorted({r for c in by_task.values() for (_, r) in c if r > 0})
    methods = list(dict.fromkeys(m for c in by_task.values() for (m, _) in c))
    full = {t: 1.0 - (c[("none", 0.0)]["compression_ratio"] if ("none", 0.0) in c else 0.0) for t, c in by_task.items()}

    def cell(method, r):
        parts = []
        for t in tasks:
            res = by_task[t].get((method, r))
            parts.append("{:.2f} ± {:.2f}".format(*score(res)[:2]) if res else "–")
        return " / ".join(parts)

    def kept_share(method, r):
        shares = [kept(by_task[t][(method, r)], full[t]) for t in tasks if (method, r) in by_task[t]]
        return sum(shares) / len(shares)

    lines = [f"### {' / '.join(tasks)} (mean ± standard error per task; cache kept: measured bytes in RAM vs uncompressed)\n",
             "uncompressed: " + cell("none", 0.0) + "\n",
             "| method | " + " | ".join(f"{r}" for r in ratios) + " |", "|---|" + "---|" * len(ratios)]
    for method in methods:
        if method != "none" and any((method, r) in c for c in by_task.values() for r in ratios):
            combined_press = "+" in method
            lines.append(f"| {label(method)} | " + " | ".join(
                cell(method, r) + (f" ({kept_share(method, r):.3f})" if combined_press else "") for r in ratios) + " |")
    presses = [m for m in methods if "+" not in m and m != "none"]
    lines.append("| *cache kept* | " + " | ".join(
        "{:.3f}".format(sum(kept_share(m, r) for m in presses if any((m, r) in c for c in by_task.values())) /
                        max(1, sum(1 for m in presses if any((m, r) in c for c in by_task.values()))))
        for r in ratios) + " |\n")
    own = [m for m in methods if m != "none" and any((m, 0.0) in c for c in by_task.values())]
    if own:
        lines += ["| cache at its own memory | score | cache kept (in RAM) |", "|---|---|---|"]
        lines += [f"| {label(m)} | {cell(m, 0.0)} | {kept_share(m, 0.0):.3f} |" for m in own]
        lines.append("")
    return "\n".join(lines)


def curves(by_task):
    """Per method: (kept share, score) averaged over the sampled tasks that have every one of its cells."""
    by_task = {t: c for t, c in by_task.items() if not is_text(c)}
    out = {}
    tasks = list(by_task)
    for method in dict.fromkeys(m for c in by_task.values() for (m, _) in c):
        ratios = sorted({r for c in by_task.values() for (m, r) in c if m == method})
        points = []
        for r in ratios:
            if not all((method, r) in by_task[t] for t in tasks):
                continue
            shares, scores = [], []
            for t in tasks:
                base = by_task[t].get(("none", 0.0))
                full = 1.0 - (base["compression_ratio"] if base else 0.0)
                shares.append(kept(by_task[t][(method, r)], full))
                scores.append(score(by_task[t][(method, r)])[0])
            points.append((sum(shares) / len(shares), sum(scores) / len(scores)))
        if points:
            out[method] = sorted(points, reverse=True)
    return out


def plot(out, by_task):
    if shutil.which("gnuplot") is None:
        print("leaderboard_table.py: gnuplot not found; no plot written", file=sys.stderr)
        return
    lines = curves(by_task)
    if not lines:
        return
    by_task = {t: c for t, c in by_task.items() if not is_text(c)}
    dat, gp, png = out / "leaderboard.dat", out / "leaderboard.gp", out / "leaderboard.png"
    with open(dat, "w") as f:
        for method, points in lines.items():
            f.write(f"# {label(method)}\n")
            for share, s in points:
                f.write(f"{share:.4f} {s:.4f}\n")
            f.write("\n\n")
    title = "mean score over " + ", ".join(by_task) if len(by_task) > 1 else f"{next(iter(by_task))} score"
    names = ["uncompressed" if m == "none" else label(m) for m in lines]
    plots = [f"'{dat.name}' index {i} with linespoints title '{n}'" for i, n in enumerate(names)]
    gp.write_text(
        "set terminal pngcairo size 1100,700 noenhanced\n"
        f"set output '{png.name}'\n"
        f"set title '{title} vs cache kept'\n"
        "set xlabel 'cache kept in RAM vs uncompressed (measured bytes)'\nset ylabel 'score'\n"
        "set xrange [1.02:0]\nset yrange [0:1.05]\nset key outside right\nset grid\n"
        "plot " + ", \\\n     ".join(plots) + "\n")
    subprocess.run(["gnuplot", gp.name], cwd=out, check=True)


def main():
    out, tasks = Path(sys.argv[1]), sys.argv[2:]
    by_task = {t: cells(results_file(out / t)) for t in tasks if results_file(out / t).exists()}
    overall = combined(by_task)
    if overall:
        print(overall)
    for t, c in by_task.items():
        print(table(t, c))
    if by_task:
        plot(out, by_task)


if __name__ == "__main__":
    main()
