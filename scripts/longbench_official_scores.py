#!/usr/bin/env python3
"""Scores data/reference/longbench_scorer/cases.jsonl and datasets.jsonl with LongBench's own metrics.py
and eval.py, imported unchanged, and writes official_scores.json, which tests/base/test_longbench_scorer.cpp
compares kvc's metrics with.

  results    one per line of cases.jsonl, in order: the official score, or {"raised": "<exception>"}
             where the official function raises (retrieval with no "Paragraph N" in the ground truth)
  datasets   eval.py's scorer() per data set of datasets.jsonl: first-line cut for trec, triviaqa,
             samsum and lsht, best score over the answers, round(100 * mean, 2)

Needs what LongBench's requirements.txt installs for the metrics: rouge, jieba, fuzzywuzzy (without
python-Levenshtein, which it does not list, fuzzywuzzy uses difflib), and numpy for eval.py.

Usage: python3 scripts/longbench_official_scores.py --longbench DIR [--dir data/reference/longbench_scorer]
DIR is a folder holding metrics.py and eval.py (a checkout's LongBench/ folder), or a clone of
github.com/THUDM/LongBench (bare or not), read at HEAD. A developer tool: kvc and its tests never run it.
"""
import argparse
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import warnings

def longbench_sources(folder):
    """The folder holding metrics.py and eval.py, and the commit they come from."""
    if os.path.isfile(os.path.join(folder, "metrics.py")):
        try:
            commit = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True,
                                    check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = "unknown"
        return folder, commit
    commit = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    repo, folder = folder, tempfile.mkdtemp(prefix="longbench-")
    for name in ["metrics.py", "eval.py"]:
        text = subprocess.run(["git", "-C", repo, "show", f"HEAD:LongBench/{name}"], capture_output=True,
                              check=True).stdout
        with open(os.path.join(folder, name), "wb") as f:
            f.write(text)
    return folder, commit


def package_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def score_cases(metrics, cases, class_lists):
    """Called straight from module level, so that the metric runs as deep in the stack as under eval.py
    (<module> -> scorer -> metric): the rouge package's recursion limit depends on it."""
    results = []
    for case in cases:
        metric = getattr(metrics, case["metric"])
        all_classes = class_lists[case["class_list"]] if "class_list" in case else None
        try:
            results.append(metric(case["prediction"], case["ground_truth"], all_classes=all_classes))
        except Exception as error:  # the official code raised: the golden records which exception
            results.append({"raised": type(error).__name__})
    return results


def group_datasets(records):
    """eval.py reads one file per data set and keeps the last line's all_classes."""
    grouped = {}
    for record in records:
        entry = grouped.setdefault(record["dataset"], {"predictions": [], "answers": [], "all_classes": None})
        entry["predictions"].append(record["pred"])
        entry["answers"].append(record["answers"])
        entry["all_classes"] = record["all_classes"]
    return grouped


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--longbench", required=True, help="folder with LongBench's metrics.py and eval.py")
    parser.add_argument("--dir", default="data/reference/longbench_scorer")
    args = parser.parse_args()
    folder, commit = longbench_sources(args.longbench)
    sys.path.insert(0, folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fuzzywuzzy warns that it falls back to difflib
        metrics = importlib.import_module("metrics")
        eval_module = importlib.import_module("eval")
    sequence_matcher = metrics.fuzz.SequenceMatcher
    import jieba
    jieba.setLogLevel(60)
    jieba.initialize()

    cases = read_jsonl(os.path.join(args.dir, "cases.jsonl"))
    with open(os.path.join(args.dir, "class_lists.json"), encoding="utf-8") as f:
        class_lists = json.load(f)
    results = score_cases(metrics, cases, class_lists)
    # eval.scorer straight from module level, as eval.py calls it (a comprehension would add a frame).
    datasets = []
    for name, entry in group_datasets(read_jsonl(os.path.join(args.dir, "datasets.jsonl"))).items():
        total = eval_module.scorer(name, entry["predictions"], entry["answers"], entry["all_classes"])
        datasets.append({"dataset": name, "samples": len(entry["predictions"]), "total": total})

    golden = {
        "source": "github.com/THUDM/LongBench LongBench/metrics.py and eval.py, imported unchanged",
        "commit": commit,
        "python": sys.version.split()[0],
        "recursion_limit": sys.getrecursionlimit(),
        "packages": {name: package_version(name)
                     for name in ["rouge", "jieba", "fuzzywuzzy", "python-Levenshtein", "numpy"]},
        "fuzz_sequence_matcher": f"{sequence_matcher.__module__}.{sequence_matcher.__name__}",
        "cases": len(cases),
        "results": results,
        "datasets": datasets,
    }
    out = os.path.join(args.dir, "official_scores.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    raised = sum(1 for r in results if isinstance(r, dict))
    print(f"{out}: {len(results)} cases ({raised} raised), {len(datasets)} data sets")
