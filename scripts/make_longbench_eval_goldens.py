#!/usr/bin/env python3
"""Prediction files for all 21 LongBench data sets, scored by LongBench's own eval.py.

Writes data/reference/longbench_eval/pred/<data set>.jsonl (pred.py's format: pred, answers, all_classes,
length) and data/reference/longbench_eval/scores.json: for every file, eval.py's scorer() (the number
LongBench reports; also per line, each line scored alone, and each line's metric value before
rounding) and scorer_e() (LongBench-E's length buckets), computed by importing the official
eval.py and metrics.py unchanged. tests/base/test_longbench_datasets.cpp scores the same files with kvc and
compares.

Usage: python3 scripts/make_longbench_eval_goldens.py --longbench DIR [--lines 40] [--seed 0]
DIR is a checkout of github.com/THUDM/LongBench. Needs jieba, rouge, fuzzywuzzy and numpy (pip), as
LongBench's requirements.txt installs them. A developer tool: kvc and its tests never run it.

There is no LongBench data here, so the predictions and answers are made from the repository's texts
(data/text) and jieba's dictionary words, in each data set's answer form, mixing right, partly right,
wrong, empty, multi-line and Unicode predictions.

--real DIR adds real model outputs: DIR/pred/*.jsonl and DIR/pred_e/*.jsonl as LongBench's pred.py wrote
them (e.g. Llama-2-7B-chat's predictions published in forks of LongBench); the first lines of each file,
up to --real-bytes, are copied to data/reference/longbench_eval/<--real-name>/ and scored the same way.
"""
import argparse
import glob
import importlib.util
import json
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TREC_CLASSES = ["Abbreviation", "Expression abbreviated", "Animal", "Organ of body", "Color", "Food",
                "Other entity", "Definition of something", "Description of something", "Manner of an action",
                "Reason", "Group or organization of persons", "Individual", "Title of a person", "City",
                "Country", "Mountain", "Other location", "State", "Code", "Count", "Date", "Distance",
                "Money", "Order", "Other number", "Period of time", "Percentage", "Speed", "Temperature"]
LSHT_CLASSES = ["农业、农村", "军事", "教育", "体育", "经济", "文化", "政治", "社会", "科技", "国际", "交通",
                "环境", "教育、文化", "医药、卫生", "法律、司法", "财税、金融"]


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def english_sentences():
    text = ""
    for path in sorted(glob.glob(os.path.join(ROOT, "data/text/pg_essays/*.txt")))[:12]:
        with open(path, encoding="utf-8") as f:
            text += f.read() + " "
    sentences = [s.strip() for s in text.replace("\n", " ").split(". ") if 20 < len(s.strip()) < 300]
    return sentences


def chinese_words():
    import jieba
    path = os.path.join(os.path.dirname(jieba.__file__), "dict.txt")
    words = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            word, freq = line.split()[:2]
            if int(freq) > 2000:
                words.append(word)
    return words


def code_lines():
    lines = []
    for path in sorted(glob.glob(os.path.join(ROOT, "lib/kernels/*.cpp")))[:6]:
        with open(path, encoding="utf-8") as f:
            lines += [line.rstrip("\n") for line in f if 10 < len(line.strip()) < 120]
    return lines


def vary(rng, answer, pool, join=" "):
    """A prediction for `answer`: right, decorated, partial, wrong, empty or multi-line."""
    kind = rng.randrange(9)
    words = answer.split(join) if join else list(answer)
    other = rng.choice(pool)
    if kind == 0:
        return answer
    if kind == 1:
        return "The answer is " + answer + "."
    if kind == 2:
        return join.join(words[: max(1, len(words) // 2)])
    if kind == 3:
        return other
    if kind == 4:
        return ""
    if kind == 5:
        return "\n" + answer + "\n" + other
    if kind == 6:
        return answer.upper() + join + other
    if kind == 7:
        return other + "\n\n" + answer
    return "  " + join.join(rng.sample(words, len(words))) + " "


def make_lines(name, rng, n, en, zh, code):
    lines = []
    for i in range(n):
        length = rng.choice([rng.randrange(500, 4000), rng.randrange(4000, 8000), rng.randrange(8000, 20000)])
        classes = None
        if name in ("trec", "lsht"):
            classes = TREC_CLASSES if name == "trec" else LSHT_CLASSES
            answers = [rng.choice(classes)]
            pick = rng.sample(classes, rng.randrange(0, 3))
            pred = rng.choice([answers[0], " ".join(pick + answers), " ".join(pick), "\n" + answers[0] + "\nType: x",
                               answers[0].lower(), ""])
        elif name == "passage_count":
            answers = [rng.randrange(1, 30)]
            pred = rng.choice([str(answers[0]), f"There are {answers[0]} unique paragraphs.", f"{answers[0]}, {rng.randrange(30)}",
                               "none", "１２", str(rng.randrange(30))])
        elif name in ("passage_retrieval_en", "passage_retrieval_zh"):
            k = rng.randrange(1, 31)
            answers = [f"Paragraph {k}" if name.endswith("en") else f"段落{k}"]
            pred = rng.choice([answers[0], f"Paragraph {k}, or Paragraph {rng.randrange(1, 31)}", f"段落{k}",
                               str(rng.randrange(1, 31)), "", f"The answer is: Paragraph {k}\n\nParagraph 3"])
        elif name in ("lcc", "repobench-p"):
            answers = [rng.choice(code)]
            pred = rng.choice([answers[0], "```cpp\n" + answers[0] + "\n```", "# comment\n" + rng.choice(code),
                               answers[0][: len(answers[0]) // 2], "\n\n" + rng.choice(code), "// x\n" + answers[0],
                               answers[0].replace(" ", "")])
        elif name in ("multifieldqa_zh", "dureader", "vcsum"):
            size = 3 if name == "multifieldqa_zh" else 12 if name == "dureader" else 40
            answers = ["".join(rng.choice(zh) for _ in range(rng.randrange(1, size + 1))) +
                       rng.choice(["", "。", "，以及" + rng.choice(zh)]) for _ in range(rng.randrange(1, 3))]
            pred = vary(rng, answers[0], zh, join="")
        else:
            sentence = rng.choice(en)
            if name in ("gov_report", "qmsum", "multi_news", "samsum"):
                answer = ". ".join(rng.choice(en) for _ in range(rng.randrange(1, 6))) + "."
            else:
                words = sentence.split()
                start = rng.randrange(len(words))
                answer = " ".join(words[start:start + rng.randrange(1, 6)])
            answers = [answer] + ([rng.choice(en)[:40]] if rng.random() < 0.3 else [])
            pred = vary(rng, answer, en)
        lines.append({"pred": pred, "answers": answers, "all_classes": classes, "length": length})
    return lines


def exact_line_scores(official, name, predictions, answers, all_classes):
    """Each line's score before eval.py's rounding: its metric function (dataset2metric) on the line cut
    as scorer() cuts it, best over the answers."""
    out = []
    for prediction, ground_truths in zip(predictions, answers):
        if name in ["trec", "triviaqa", "samsum", "lsht"]:
            prediction = prediction.lstrip('\n').split('\n')[0]
        out.append(max(official.dataset2metric[name](prediction, gt, all_classes=all_classes) for gt in ground_truths))
    return out


def without_nan(value):
    """numpy's mean of an empty bucket is NaN, which JSON cannot hold: null instead."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nan(v) for v in value]
    return value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--longbench", required=True, help="checkout of THUDM/LongBench")
    parser.add_argument("--out", default=os.path.join(ROOT, "data/reference/longbench_eval"))
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--real", help="folder with pred/ and pred_e/ prediction files of a real model")
    parser.add_argument("--real-name", default="llama2-7b-chat-4k")
    parser.add_argument("--real-bytes", type=int, default=50000, help="bytes kept of each real file")
    args = parser.parse_args()
    base = os.path.join(args.longbench, "LongBench")
    sys.path.insert(0, base)
    load_module("metrics", os.path.join(base, "metrics.py"))
    official = load_module("longbench_eval", os.path.join(base, "eval.py"))
    en, zh, code = english_sentences(), chinese_words(), code_lines()
    os.makedirs(os.path.join(args.out, "pred"), exist_ok=True)
    scores = {}
    for name in official.dataset2metric:
        rng = random.Random(f"{args.seed}:{name}")
        lines = make_lines(name, rng, args.lines, en, zh, code)
        with open(os.path.join(args.out, "pred", f"{name}.jsonl"), "w", encoding="utf-8") as f:
            for line in lines:
                json.dump(line, f, ensure_ascii=False)
                f.write("\n")
        predictions = [line["pred"] for line in lines]
        answers = [line["answers"] for line in lines]
        lengths = [line["length"] for line in lines]
        all_classes = lines[-1]["all_classes"]  # as eval.py: the last line's
        per_line = [official.scorer(name, [p], [a], all_classes) for p, a in zip(predictions, answers)]
        scores[name] = {"score": official.scorer(name, predictions, answers, all_classes),
                        "per_line": per_line,
                        "per_line_exact": exact_line_scores(official, name, predictions, answers, all_classes),
                        "score_e": official.scorer_e(name, predictions, answers, lengths, all_classes)}
    real = {}
    if args.real:
        for part in ("pred", "pred_e"):
            for path in sorted(glob.glob(os.path.join(args.real, part, "*.jsonl"))):
                name = os.path.basename(path)[: -len(".jsonl")]
                kept, size = [], 0
                with open(path, encoding="utf-8") as f:
                    for raw in f:
                        if size + len(raw.encode("utf-8")) > args.real_bytes and kept:
                            break
                        kept.append(json.loads(raw))
                        size += len(raw.encode("utf-8"))
                out_dir = os.path.join(args.out, args.real_name, part)
                os.makedirs(out_dir, exist_ok=True)
                with open(os.path.join(out_dir, f"{name}.jsonl"), "w", encoding="utf-8") as f:
                    for line in kept:
                        json.dump(line, f, ensure_ascii=False)
                        f.write("\n")
                predictions = [line["pred"] for line in kept]
                answers = [line["answers"] for line in kept]
                lengths = [line["length"] for line in kept]
                all_classes = kept[-1]["all_classes"]
                per_line = [official.scorer(name, [p], [a], all_classes) for p, a in zip(predictions, answers)]
                real[f"{part}/{name}"] = {"dataset": name, "score": official.scorer(name, predictions, answers, all_classes),
                                          "per_line": per_line,
                                          "per_line_exact": exact_line_scores(official, name, predictions, answers,
                                                                              all_classes),
                                          "score_e": official.scorer_e(name, predictions, answers, lengths, all_classes)}
    import jieba, rouge, fuzzywuzzy
    try:
        import Levenshtein  # noqa: F401
        matcher = "python-Levenshtein"
    except ImportError:
        matcher = "difflib"
    golden = {"made_by": "scripts/make_longbench_eval_goldens.py --lines %d --seed %d" % (args.lines, args.seed),
              "versions": {"jieba": jieba.__version__, "rouge": getattr(rouge, "__version__", "1.0.1"),
                           "fuzzywuzzy": fuzzywuzzy.__version__, "fuzzywuzzy_matcher": matcher},
              "scores": scores, "real_model": args.real_name if real else None, "real": real}
    with open(os.path.join(args.out, "scores.json"), "w", encoding="utf-8") as f:
        json.dump(without_nan(golden), f, ensure_ascii=False, indent=1, allow_nan=False)
        f.write("\n")
    write_table(args.out, official, scores, real, args.real_name)
    print(f"{args.out}: {sum(len(v['per_line']) for v in scores.values())} made-up and "
          f"{sum(len(v['per_line']) for v in real.values())} real predictions scored by eval.py")


def write_table(out, official, scores, real, real_name):
    """README.md: per data set, what the goldens hold (tests/base/test_longbench_datasets.cpp checks kvc
    against every line)."""
    rows = ["| data set | eval.py metric | made-up predictions (score) | "
            f"{real_name} predictions, pred/ + pred_e/ (score) |", "|---|---|---|---|"]
    for name, metric in official.dataset2metric.items():
        made = scores[name]
        parts = [f"{len(real[k]['per_line'])} ({real[k]['score']})" for k in (f"pred/{name}", f"pred_e/{name}")
                 if k in real]
        rows.append(f"| {name} | {metric.__name__} | {len(made['per_line'])} ({made['score']}) | "
                    f"{' + '.join(parts) if parts else '—'} |")
    total_real = sum(len(v["per_line"]) for v in real.values())
    text = f"""# LongBench prediction files and eval.py's scores

Made by `python3 scripts/make_longbench_eval_goldens.py --longbench DIR --real DIR` (DIR: a checkout of
THUDM/LongBench; the real predictions' folder holds `pred/` and `pred_e/` as LongBench's pred.py writes
them). `scores.json` holds, per file, eval.py's `scorer()` (the number LongBench reports), `scorer_e()`
(LongBench-E's buckets), each line scored alone and each line's metric value before rounding.
`tests/base/test_longbench_datasets.cpp` scores every file with kvc and asks for the same file score,
the same buckets, the same rounded line scores and line values within 1e-9.

The made-up predictions (`pred/`) are built from the repository's texts and jieba's dictionary in each
data set's answer form. The real ones (`{real_name}/`, {total_real} lines) are the first lines (up to
50 KB per file) of the predictions Llama-2-7B-chat-4k made on LongBench itself, as published in forks
of LongBench (github.com/HaoranDeng/LongBench at fac179f8 and d3a0c0f3 for pred/,
github.com/krishnateja95/LLM-VLM-Eval-Bench at 738135df and f13aad4a for pred_e/); their scores are of
those lines, not the model's LongBench result.

{chr(10).join(rows)}
"""
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
