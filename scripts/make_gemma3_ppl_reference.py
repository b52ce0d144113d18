#!/usr/bin/env python3
"""WikiText-2 test perplexity of Gemma 3 270M (its Q4_K_M GGUF, dequantized by transformers, float32)
with kvc's reference protocol: ids = [BOS] + encode(whole file), consecutive non-overlapping windows,
every token but each window's first scored. Writes data/reference/gemma3-270m/perplexity.json, which
`kvc-eval ppl -m $(scripts/model_path.sh gemma3-270m) --file data/text/wikitext2/wiki.test.raw
--window 512 --max-windows 4` is compared with (tests/core/test_gemma3_gguf.cpp).

  python3 scripts/make_gemma3_ppl_reference.py $(scripts/model_path.sh gemma3-270m)"""
import json
import math
import os
import pathlib
import sys

import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_gemma3_tokenizer_goldens import spm_from_gguf  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "reference" / "gemma3-270m" / "perplexity.json"
FILE = ROOT / "data" / "text" / "wikitext2" / "wiki.test.raw"
WINDOW, MAX_WINDOWS = 512, 4


def main():
    path = sys.argv[1]
    sp = spm_from_gguf(path)
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 torch_dtype=torch.float32, attn_implementation="eager").eval()
    ids = [2] + sp.EncodeAsIds(FILE.read_text(encoding="utf-8"))
    nll, scored, per_window = 0.0, 0, []
    for w in range(MAX_WINDOWS):
        chunk = ids[w * WINDOW:(w + 1) * WINDOW]
        with torch.no_grad():
            logits = model(torch.tensor([chunk])).logits[0].double()
        lp = torch.log_softmax(logits[:-1], -1).gather(1, torch.tensor(chunk[1:]).unsqueeze(1))
        window_nll = -lp.sum().item()
        per_window.append(math.exp(window_nll / (len(chunk) - 1)))
        nll += window_nll
        scored += len(chunk) - 1
    result = {"reference": f"transformers {__import__('transformers').__version__}, float32, eager attention",
              "file": "wiki.test.raw", "window": WINDOW, "max_windows": MAX_WINDOWS, "tokens_in_file": len(ids),
              "tokens_scored": scored, "ppl": math.exp(nll / scored), "ppl_per_window": per_window}
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
