#!/usr/bin/env python3
"""Reference logits and perplexity of SmolLM2-135M-Instruct (its Q4_1 GGUF, which transformers dequantizes
to float32 itself) from Hugging Face transformers in float32 with eager attention.

The token ids come from a `tokenizers` BPE built from the file's vocabulary and merges with SmolLM2's
pre-tokenizer (scripts/make_gguf_vocab_goldens.py: smollm_tokenizers_reference; transformers' own GGUF
tokenizer has no split for tokenizer.ggml.pre = smollm). The file says add_bos_token = false, so no BOS.

  logits.json      for a few prompts (a ChatML conversation among them, and one of 1,200 tokens whose last 32
                   positions are kept): each position's argmax and the logits of a fixed set of ids (every
                   position's top 8 and 32 random ids)
  perplexity.json  WikiText-2 test with kvc's reference protocol (consecutive windows of 512, every token but
                   each window's first scored), 4 windows

tests/core/test_smollm2_gguf.cpp compares kvc with both.

  /tmp/venv-ref/bin/python scripts/make_smollm2_goldens.py $(scripts/model_path.sh smollm2-135m)
Needs torch, transformers, gguf and tokenizers from PyPI."""
import json
import math
import os
import pathlib
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_gguf_vocab_goldens import smollm_tokenizers_reference  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "reference" / "smollm2-135m"
WIKI = ROOT / "data" / "text" / "wikitext2" / "wiki.test.raw"
PROMPTS = [
    "The capital of France is",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "In 1969, 3 astronauts flew 384,400 km to the Moon.",
]
LONG_PROMPT_CHARS, LONG_KEPT = 5000, 32
WINDOW, MAX_WINDOWS = 512, 4


def main():
    path = sys.argv[1]
    tok = smollm_tokenizers_reference(path)
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 torch_dtype=torch.float32, attn_implementation="eager").eval()
    version = __import__("transformers").__version__
    rng = np.random.default_rng(13)
    out = {"reference": f"transformers {version}, float32, eager attention", "tolerance": 1e-3, "prompts": []}
    long_prompt = WIKI.read_text(encoding="utf-8")[1000:1000 + LONG_PROMPT_CHARS]
    for prompt in PROMPTS + [long_prompt]:
        ids = tok.encode(prompt, add_special_tokens=False).ids
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
        first = len(ids) - LONG_KEPT if prompt is long_prompt else 0
        logits = logits[first:]
        top = torch.topk(logits, 8, dim=-1).indices.flatten().tolist()
        vocab = sorted(set(top) | set(rng.integers(0, logits.shape[-1], 32).tolist()))
        out["prompts"].append({"text": prompt, "ids": ids, "first_position": first, "vocab_ids": vocab,
                               "argmax": logits.argmax(-1).tolist(), "logits": logits[:, vocab].tolist()})
        print(repr(prompt[:50]), len(ids), "->", repr(tok.decode([int(logits[-1].argmax())])), file=sys.stderr)
    (OUT / "logits.json").write_text(json.dumps(out) + "\n")

    ids = tok.encode(WIKI.read_text(encoding="utf-8"), add_special_tokens=False).ids
    nll, scored, per_window = 0.0, 0, []
    for w in range(MAX_WINDOWS):
        chunk = ids[w * WINDOW:(w + 1) * WINDOW]
        with torch.no_grad():
            logits = model(torch.tensor([chunk])).logits[0].double()
        lp = torch.log_softmax(logits[:-1], -1).gather(1, torch.tensor(chunk[1:]).unsqueeze(1))
        per_window.append(math.exp(-lp.sum().item() / (len(chunk) - 1)))
        nll -= lp.sum().item()
        scored += len(chunk) - 1
    ppl = {"reference": f"transformers {version}, float32, eager attention", "file": "wiki.test.raw",
           "window": WINDOW, "max_windows": MAX_WINDOWS, "tokens_in_file": len(ids), "tokens_scored": scored,
           "ppl": math.exp(nll / scored), "ppl_per_window": per_window}
    (OUT / "perplexity.json").write_text(json.dumps(ppl, indent=1) + "\n")
    print(json.dumps(ppl), file=sys.stderr)


if __name__ == "__main__":
    main()
