#!/usr/bin/env python3
"""Copies LongBench's own per-data-set settings into data/reference/longbench_config/ so that the tests can
compare kvc's table of data sets (prompt templates, generation lengths, metrics, first-line scoring) with
the official ones.

Usage: python3 scripts/make_longbench_config_goldens.py --longbench DIR [--out data/reference/longbench_config]
DIR is a checkout of github.com/THUDM/LongBench (the folder holding LongBench/config and LongBench/eval.py).
A developer tool: kvc and its tests never run it.
"""
import argparse
import ast
import json
import os
import subprocess


def eval_py_tables(source):
    """dataset2metric (data set -> metric function name) and the data sets scored on their first line,
    read from eval.py's syntax tree rather than by importing it (it imports numpy and the metrics)."""
    tree = ast.parse(source)
    metrics, first_line = None, None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "dataset2metric":
            metrics = {k.value: v.id for k, v in zip(node.value.keys, node.value.values)}
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            cmp = node.test
            if isinstance(cmp.left, ast.Name) and cmp.left.id == "dataset" and isinstance(cmp.ops[0], ast.In):
                names = [e.value for e in cmp.comparators[0].elts]
                body = ast.unparse(node.body[0])
                if "split('\\n')[0]" in body:
                    first_line = sorted(set(first_line or []) | set(names))
    if metrics is None or first_line is None:
        raise SystemExit("eval.py: dataset2metric or the first-line rule not found; has LongBench changed?")
    return metrics, first_line


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--longbench", required=True, help="checkout of THUDM/LongBench")
    parser.add_argument("--out", default="data/reference/longbench_config")
    args = parser.parse_args()
    base = os.path.join(args.longbench, "LongBench")
    with open(os.path.join(base, "config", "dataset2prompt.json"), encoding="utf-8") as f:
        prompts = json.load(f)
    with open(os.path.join(base, "config", "dataset2maxlen.json"), encoding="utf-8") as f:
        maxlen = json.load(f)
    with open(os.path.join(base, "eval.py"), encoding="utf-8") as f:
        metrics, first_line = eval_py_tables(f.read())
    try:
        commit = subprocess.run(["git", "-C", args.longbench, "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    datasets = {}
    for name, template in prompts.items():
        datasets[name] = {"prompt": template, "max_new_tokens": maxlen[name], "metric": metrics[name],
                          "first_line_only": name in first_line}
    os.makedirs(args.out, exist_ok=True)
    golden = {"source": "github.com/THUDM/LongBench LongBench/config/dataset2prompt.json, dataset2maxlen.json, eval.py",
              "commit": commit, "datasets": datasets}
    path = os.path.join(args.out, "datasets.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{path}: {len(datasets)} data sets from LongBench {commit[:12]}")


if __name__ == "__main__":
    main()
