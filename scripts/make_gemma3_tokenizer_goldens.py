#!/usr/bin/env python3
"""Token ids of Gemma 3 270M's GGUF vocabulary on varied texts, from the SentencePiece library:
the GGUF's tokens, scores and token types are written into a SentencePiece BPE model (what Gemma's own
tokenizer.model is: byte fallback, no dummy prefix, no whitespace normalisation), which then encodes;
user-defined runs of spaces are spelt with U+2581 there (see spm_from_gguf).
Writes data/reference/gemma3-270m/tokenizer.json; tests/core/test_gemma3_gguf.cpp compares kvc.

  python3 scripts/make_gemma3_tokenizer_goldens.py $(scripts/model_path.sh gemma3-270m)
Needs gguf, sentencepiece and protobuf from PyPI."""
import json
import pathlib
import sys

import sentencepiece as spm
from gguf import GGUFReader
from sentencepiece import sentencepiece_model_pb2 as pb

OUT = pathlib.Path(__file__).resolve().parent.parent / "data" / "reference" / "gemma3-270m" / "tokenizer.json"

TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    " leading space",
    "   three leading spaces",
    "trailing spaces   ",
    "a  b   c    d",
    "line one\nline two\n\nline four\n\n\n\nend",
    "\ttabs\tand\t\tmore tabs",
    "Numbers: 0 7 42 1234567890 3.14159 -17 1e-9 2024-11-23",
    "naïve café déjà vu, Ångström, Straße, Øresund",
    "日本語のテキストと中文文本，还有한국어 텍스트.",
    "Emoji: 🤖👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️",
    "Math: ∑_{i=1}^{n} x_i² ≤ √(n·∑x_i²) ∀ε>0",
    "def f(x):\n    return x ** 2  # square\n",
    "<html><body><div class=\"a\">text</div></body></html>",
    "URL https://example.com/path?q=1&r=2#frag and e-mail a.b@c.org",
    "Ünïcödé with combining: e\u0301 a\u0308 and zero\u200bwidth",
    "Rare bytes: \u0001\u007f \u00a0nbsp",
    " = Valkyria Chronicles III = \n \n Senjō no Valkyria 3 : Unrecorded Chronicles ( Japanese : 戦場のヴァルキュリア3 , lit . Valkyria of the Battlefield 3 ) ,",
    "",
]

TYPES = {1: pb.ModelProto.SentencePiece.NORMAL, 2: pb.ModelProto.SentencePiece.UNKNOWN,
         3: pb.ModelProto.SentencePiece.CONTROL, 4: pb.ModelProto.SentencePiece.USER_DEFINED,
         5: pb.ModelProto.SentencePiece.UNUSED, 6: pb.ModelProto.SentencePiece.BYTE}


def spm_from_gguf(path):
    fields = GGUFReader(path).fields
    tokens = [bytes(fields["tokenizer.ggml.tokens"].parts[i]).decode("utf-8") for i in fields["tokenizer.ggml.tokens"].data]
    scores = [float(fields["tokenizer.ggml.scores"].parts[i][0]) for i in fields["tokenizer.ggml.scores"].data]
    types = [int(fields["tokenizer.ggml.token_type"].parts[i][0]) for i in fields["tokenizer.ggml.token_type"].data]
    m = pb.ModelProto()
    t = m.trainer_spec
    t.model_type = pb.TrainerSpec.BPE
    t.byte_fallback = True
    t.split_by_whitespace = False
    t.allow_whitespace_only_pieces = True
    t.split_digits = True
    t.unk_id, t.bos_id, t.eos_id, t.pad_id = 3, 2, 1, 0
    n = m.normalizer_spec
    n.name = "identity"
    n.add_dummy_prefix = False
    n.remove_extra_whitespaces = False
    n.escape_whitespaces = True
    for tok, score, ty in zip(tokens, scores, types):
        p = m.pieces.add()
        # llama.cpp and transformers match user-defined tokens on the raw text, so runs of spaces become
        # one token; SentencePiece matches them after turning spaces into U+2581, so it gets them spelt so.
        if ty == 4 and tok.strip(" ") == "":
            tok = tok.replace(" ", "\u2581")
        p.piece, p.score, p.type = tok, score, TYPES[ty]
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(m.SerializeToString())
    return sp


def main():
    sp = spm_from_gguf(sys.argv[1])
    cases = [{"text": text, "ids": sp.EncodeAsIds(text)} for text in TEXTS]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"reference": "sentencepiece (BPE model built from the GGUF vocabulary)",
                               "add_bos": True, "bos_id": 2, "cases": cases}, ensure_ascii=False, indent=1) + "\n")
    print(f"{len(cases)} texts -> {OUT}")


if __name__ == "__main__":
    main()
