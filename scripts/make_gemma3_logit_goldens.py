#!/usr/bin/env python3
"""Logits of Gemma 3 270M (its Q4_K_M GGUF, which transformers dequantizes to float32 itself) for a few
prompts (one of them longer than the local layers' window), from Hugging Face transformers in float32 with eager attention. For each position the file
keeps the argmax and the logits of a fixed set of vocabulary ids (every position's top 8 and 32 random
ids), which keeps it small. Writes data/reference/gemma3-270m/logits.json; tests/core/test_gemma3_gguf.cpp
compares kvc's logits with it.

  python3 scripts/make_gemma3_logit_goldens.py $(scripts/model_path.sh gemma3-270m)
Needs torch, transformers, gguf, sentencepiece and protobuf from PyPI."""
import json
import os
import pathlib
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_gemma3_tokenizer_goldens import spm_from_gguf  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "data" / "reference" / "gemma3-270m" / "logits.json"
PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little robot who",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
]
# Past the local layers' 512-token window and past the 1024 entries at which kvc trims their caches:
# only the last LONG_KEPT positions are kept in the file.
LONG_PROMPT_CHARS, LONG_KEPT = 5000, 32
WIKI = pathlib.Path(__file__).resolve().parent.parent / "data" / "text" / "wikitext2" / "wiki.test.raw"


def main():
    path = sys.argv[1]
    sp = spm_from_gguf(path)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    print(model.config, file=sys.stderr)
    rng = np.random.default_rng(13)
    out = {"reference": f"transformers {__import__('transformers').__version__}, float32, eager attention",
           "tolerance": 1e-3, "prompts": []}
    long_prompt = WIKI.read_text(encoding="utf-8")[1000:1000 + LONG_PROMPT_CHARS]
    for prompt in PROMPTS + [long_prompt]:
        ids = [2] + sp.EncodeAsIds(prompt)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
        first = len(ids) - LONG_KEPT if prompt is long_prompt else 0
        logits = logits[first:]
        top = torch.topk(logits, 8, dim=-1).indices.flatten().tolist()
        vocab = sorted(set(top) | set(rng.integers(0, logits.shape[-1], 32).tolist()))
        out["prompts"].append({"text": prompt, "ids": ids, "first_position": first, "vocab_ids": vocab,
                               "argmax": logits.argmax(-1).tolist(),
                               "logits": logits[:, vocab].tolist()})
        print(prompt[:60], "->", sp.DecodeIds([int(logits[-1].argmax())]), file=sys.stderr)
    OUT.write_text(json.dumps(out) + "\n")
    print(f"{len(out['prompts'])} prompts -> {OUT}")


if __name__ == "__main__":
    main()
