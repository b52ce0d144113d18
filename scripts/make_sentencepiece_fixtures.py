#!/usr/bin/env python3
"""Writes tests/fixtures/sentencepiece/: a real SentencePiece model with an nmt_nfkc normalizer (its
precompiled character map is the part libsentencepiece trusts), ids for a few texts as the
`sentencepiece` package tokenizes them, and where the map lies in the file, so that tests can damage
it in place.

Usage: python3 scripts/make_sentencepiece_fixtures.py   (needs: pip install sentencepiece protobuf)
"""
import json
import pathlib
import struct
import tempfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as model_pb2

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests/fixtures/sentencepiece"
CORPUS = ROOT / "data/text/tinystories/tinystories_excerpt_30k.txt"
TEXTS = ["Once upon a time", "ｆｕｌｌｗｉｄｔｈ Ｌｉｌｙ ①②", "ﬁne café  spaces", "Tom said: \"hi!\""]


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = pathlib.Path(tmp) / "corpus.txt"
        corpus.write_bytes(CORPUS.read_bytes()[:200000])
        prefix = str(pathlib.Path(tmp) / "nfkc")
        spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=prefix, vocab_size=300,
                                       normalization_rule_name="nmt_nfkc", model_type="unigram",
                                       num_threads=1, minloglevel=2)
        model = pathlib.Path(prefix + ".model").read_bytes()
    (OUT / "nfkc").mkdir(exist_ok=True)
    (OUT / "nfkc/tokenizer.model").write_bytes(model)
    processor = spm.SentencePieceProcessor(model_proto=model)
    charsmap = model_pb2.ModelProto.FromString(model).normalizer_spec.precompiled_charsmap
    goldens = {
        # Where the tests damage the map in place: its first byte in the file, its size, its trie's size.
        "charsmap_offset": model.index(charsmap),
        "charsmap_bytes": len(charsmap),
        "trie_bytes": struct.unpack_from("<I", charsmap)[0],
        "texts": [{"text": t, "ids": processor.encode(t)} for t in TEXTS],
    }
    (OUT / "nfkc.json").write_text(json.dumps(goldens, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()

