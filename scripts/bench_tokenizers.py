#!/usr/bin/env python3
"""Encoding speed of kvc-tokenize next to the Hugging Face `tokenizers` library, same text, same run,
and whether the two agree on the whole text token for token. A developer tool:

    /tmp/venv-tok/bin/python scripts/bench_tokenizers.py [--file data/text/wikitext2/wiki.test.raw]
        [--tokenizer data/tokenizers/llama3-style/tokenizer.json ...] [--kvc build/bin/kvc-tokenize]

MB/s are of the file's UTF-8 bytes. kvc encodes on one thread; `tokenizers` is timed on one call over
the whole text and on encode_batch over its lines (which uses every core, here 2).
"""
import argparse
import json
import pathlib
import subprocess
import time

from tokenizers import Tokenizer

REPO = pathlib.Path(__file__).resolve().parent.parent


def best_of(passes, fn):
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), times[0], result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", default="data/text/wikitext2/wiki.test.raw")
    parser.add_argument("--tokenizer", action="append")
    parser.add_argument("--kvc", default="build/bin/kvc-tokenize")
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    tokenizers = args.tokenizer or ["data/tokenizers/llama3-style/tokenizer.json",
                                    "data/tokenizers/qwen2-style/tokenizer.json",
                                    "data/tokenizers/gpt2-style/tokenizer.json"]
    text = (REPO / args.file).read_text(encoding="utf-8")
    mb = len(text.encode("utf-8")) / 1e6
    lines = text.splitlines(keepends=True)
    print(f"{args.file}: {mb:.3f} MB, {len(lines)} lines")
    print("| tokenizer | kvc MB/s (first, best) | tokenizers one call MB/s | tokenizers encode_batch MB/s | tokens | mismatches |")
    print("|---|---|---|---|---|---|")
    for path in tokenizers:
        bench = json.loads(subprocess.run([args.kvc, "-m", path, "--bench", "--json", "-f", str(REPO / args.file),
                                           "--bench-passes", str(args.passes)],
                                          check=True, capture_output=True, text=True, cwd=REPO).stdout)
        kvc_ids = json.loads(subprocess.run([args.kvc, "-m", path, "--no-bos", "--json", "-f", str(REPO / args.file)],
                                            check=True, capture_output=True, text=True, cwd=REPO).stdout)["ids"]
        hf = Tokenizer.from_file(str(REPO / path) if not pathlib.Path(path).is_absolute() else path)
        one_best, _, encoding = best_of(args.passes, lambda: hf.encode(text, add_special_tokens=False))
        batch_best, _, _ = best_of(args.passes, lambda: hf.encode_batch(lines, add_special_tokens=False))
        hf_ids = encoding.ids
        mismatches = sum(1 for a, b in zip(kvc_ids, hf_ids) if a != b) + abs(len(kvc_ids) - len(hf_ids))
        print(f"| {path} | {bench['first_pass_mb_per_s']:.2f}, {bench['best_mb_per_s']:.2f} | {mb / one_best:.2f} | "
              f"{mb / batch_best:.2f} | {len(hf_ids)} | {mismatches} |")


if __name__ == "__main__":
    main()
