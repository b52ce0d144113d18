#!/usr/bin/env python3
"""One table from several kvc-eval sweeps: rows are methods, columns tasks x ratios, cells the mean
score over the samples ± its standard error, with the cache's measured compression per ratio.
Usage: scripts/leaderboard_table.py OUT TASK [TASK ...]   (reads OUT/TASK/results.jsonl)"""
import json
import math
import sys
from pathlib import Path


def cells(path):
    out = {}
    for line in open(path):
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


def main():
    out, tasks = Path(sys.argv[1]), sys.argv[2:]
    by_task = {t: cells(out / t / "results.jsonl") for t in tasks if (out / t / "results.jsonl").exists()}
    for t, c in by_task.items():
        ratios = sorted({r for (_, r) in c if r > 0})
        methods = list(dict.fromkeys(m for (m, _) in c))
        base = c.get(("none", 0.0))
        n = len(base["samples"]) if base else 0
        print(f"### {t} ({n} samples per cell; mean ± standard error)\n")
        if base:
            m, se, _ = mean_se([s["score"] for s in base["samples"]])
            print(f"uncompressed: {m:.3f} ± {se:.3f}\n")
        print("| method | " + " | ".join(f"{r}" for r in ratios) + " |")
        print("|---|" + "---|" * len(ratios))
        measured = {}
        for method in methods:
            if method == "none":
                continue
            row = []
            for r in ratios:
                res = c.get((method, r))
                if res is None:
                    row.append("")
                    continue
                m, se, _ = mean_se([s["score"] for s in res["samples"]])
                row.append(f"{m:.2f} ± {se:.2f}")
                measured.setdefault(r, []).append(res["compression_ratio"])
            print(f"| {method} | " + " | ".join(row) + " |")
        # The uncompressed cache may itself hold less than every layer's full prompt (sliding-window
        # layers keep their window): the kept share is measured against it.
        full = 1.0 - (base["compression_ratio"] if base else 0.0)
        print("| *cache kept vs uncompressed (measured bytes)* | " + " | ".join(
            f"{(1.0 - sum(measured[r]) / len(measured[r])) / full:.3f}" if r in measured else "" for r in ratios) + " |\n")


if __name__ == "__main__":
    main()
