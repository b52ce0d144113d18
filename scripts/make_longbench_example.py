#!/usr/bin/env python3
"""A small LongBench-format file for the examples and tests: data/text/longbench/passage_count.jsonl.

LongBench's own data is not in the repository. This file is built the way LongBench describes its
passage_count task (paragraphs, some repeated, shuffled and numbered; the answer is how many distinct
paragraphs there are) from the repository's essays (data/text/pg_essays), short enough for the bundled
models' 1,024-token context, and with every field a LongBench record has (_id, dataset, language,
length, all_classes). Usage: python3 scripts/make_longbench_example.py [--samples 4] [--seed 0]
"""
import argparse
import glob
import json
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def paragraphs():
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "data/text/pg_essays/*.txt"))):
        with open(path, encoding="utf-8") as f:
            for block in f.read().split("\n\n"):
                text = " ".join(block.split())
                if 150 < len(text) < 400:
                    out.append(text)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join(ROOT, "data/text/longbench/passage_count.jsonl"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    pool = paragraphs()
    with open(args.out, "w", encoding="utf-8") as f:
        for i in range(args.samples):
            unique = rng.sample(pool, rng.randrange(2, 5))
            shown = unique + [rng.choice(unique) for _ in range(rng.randrange(1, 3))]
            rng.shuffle(shown)
            context = "\n\n".join(f"Paragraph {k + 1}: {text}" for k, text in enumerate(shown))
            record = {"input": "", "context": context, "answers": [len(unique)], "length": len(context.split()),
                      "dataset": "passage_count", "language": "en", "all_classes": None,
                      "_id": f"kvc-example-{i}"}
            json.dump(record, f, ensure_ascii=False)
            f.write("\n")
    print(f"{args.out}: {args.samples} samples")


if __name__ == "__main__":
    main()
