#!/usr/bin/env python3
"""Counts the texts of data/tokenizers/corpus.json that kvc and transformers' GGUF tokenizer encode alike
on Gemma 3 270M (no BOS), and prints the ones they do not. A developer check, not a test dependency:

    /tmp/venv-ref/bin/python scripts/gemma3_tokenizer_vs_transformers.py [--build build]
"""
import argparse
import json
import pathlib
import subprocess
import tempfile

from transformers import AutoTokenizer

REPO = pathlib.Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    gguf = pathlib.Path(subprocess.run([str(REPO / "scripts/model_path.sh"), "gemma3-270m"], check=True,
                                       capture_output=True, text=True).stdout.strip())
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    texts = json.loads((REPO / "data/tokenizers/corpus.json").read_text(encoding="utf-8"))["texts"]
    same = tokens = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, text in enumerate(texts):
            path = pathlib.Path(tmp) / f"{i}.txt"
            path.write_bytes(text.encode("utf-8"))
            out = subprocess.run([str(REPO / args.build / "bin/kvc-tokenize"), "-m", str(gguf), "-f", str(path),
                                  "--no-bos", "--json"], check=True, capture_output=True, text=True).stdout
            ours = json.loads(out)["ids"]
            theirs = tok(text, add_special_tokens=False)["input_ids"]
            tokens += len(theirs)
            same += ours == theirs
            if ours != theirs:
                print(f"text #{i} {text[:40]!r}: transformers {theirs[:10]}..., kvc {ours[:10]}...")
    print(f"transformers and kvc: {same}/{len(texts)} texts identical ({tokens} transformers tokens)")


if __name__ == "__main__":
    main()
