#!/usr/bin/env python3
"""Writes data/reference/kvc-micro-lm/reference.{safetensors,json}: an independent float64 reference for
kvc-micro-lm computed with Hugging Face transformers, in the layout of the other models' references
(tests/core/test_reference.cpp reads it).

  python3 scripts/make_micro_lm_reference.py [--model data/models/kvc-micro-lm] [--out data/reference/kvc-micro-lm]

- logits: the model's logits over `prompt_ids` ([BOS] + the first 95 pieces of data/text/pg_essays/addiction.txt);
- greedy: 40 tokens that greedy decoding produces after [BOS] + encode(greedy_prompt_text), a needle prompt,
  with the smallest gap between the two best logits along the way (a float32 runtime must not flip a near tie);
- perplexity: the reference protocol (see perplexity_protocol in the JSON) on WikiText-2 test and TinyStories.

Everything runs in float64, RoPE angles included (transformers computes its angles in float32; they are
replaced here by float64 ones so that the reference does not carry that rounding).
A developer tool: transformers, torch, sentencepiece and safetensors are not runtime dependencies of kvc.
"""
import argparse
import json
import math
import os

import sentencepiece as spm
import torch
import transformers
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GREEDY_PROMPT = ("The secret number of the silver lantern is 73914. The best way to learn is to make things, and the "
                 "best things to make are the ones you want yourself. Most people who try this give up too early."
                 "\nWhat is the secret number of the silver lantern? The secret number of the silver lantern is")
PERPLEXITY = {"wiki.test.raw": ("wikitext2", 1024, 8), "tinystories_excerpt_30k.txt": ("tinystories", 1024, 4)}


def float64_rope(model):
    """Replaces each rotary embedding's forward with one that computes its angles in float64."""
    for module in model.modules():
        if isinstance(module, transformers.models.llama.modeling_llama.LlamaRotaryEmbedding):
            dim = model.config.head_dim
            theta = getattr(model.config, "rope_theta", None) or model.config.rope_parameters["rope_theta"]
            inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))

            def forward(x, position_ids, inv_freq=inv_freq):
                angles = position_ids.to(torch.float64)[:, :, None] * inv_freq[None, None, :]
                emb = torch.cat((angles, angles), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

            module.forward = forward


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "data/models/kvc-micro-lm"))
    ap.add_argument("--out", default=os.path.join(ROOT, "data/reference/kvc-micro-lm"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.model, "tokenizer.model"))
    model = transformers.LlamaForCausalLM.from_pretrained(args.model, torch_dtype=torch.float64,
                                                          attn_implementation="eager").eval()
    float64_rope(model)

    with open(os.path.join(ROOT, "data/text/pg_essays/addiction.txt"), encoding="utf-8") as f:
        prompt_ids = [1] + sp.encode(f.read())[:95]
    logits = model(torch.tensor([prompt_ids])).logits[0]

    greedy_prompt = [1] + sp.encode(GREEDY_PROMPT)
    ids, gaps = list(greedy_prompt), []
    for _ in range(40):
        step = model(torch.tensor([ids])).logits[0, -1]
        top = step.topk(2).values
        gaps.append(float(top[0] - top[1]))
        ids.append(int(step.argmax()))
    continuation = ids[len(greedy_prompt):]

    perplexity = {}
    for name, (folder, window, max_windows) in PERPLEXITY.items():
        with open(os.path.join(ROOT, "data/text", folder, name), encoding="utf-8") as f:
            tokens = [1] + sp.encode(f.read())
        nll, scored = 0.0, 0
        for w in range(max_windows):
            chunk = tokens[w * window:(w + 1) * window]
            if len(chunk) < 2:
                break
            out = model(torch.tensor([chunk])).logits[0, :-1].log_softmax(-1)
            nll -= float(out.gather(1, torch.tensor(chunk[1:])[:, None]).sum())
            scored += len(chunk) - 1
        perplexity[name] = {"window": window, "max_windows": max_windows, "tokens_scored": scored,
                            "ppl": round(math.exp(nll / scored), 5)}

    os.makedirs(args.out, exist_ok=True)
    save_file({"prompt_ids": torch.tensor(prompt_ids), "logits": logits.float().contiguous(),
               "greedy_prompt_ids": torch.tensor(greedy_prompt), "greedy_continuation_ids": torch.tensor(continuation)},
              os.path.join(args.out, "reference.safetensors"),
              metadata={"producer": f"transformers {transformers.__version__} in float64", "model": "kvc-micro-lm"})
    reference = {
        "model": "kvc-micro-lm",
        "producer": f"scripts/make_micro_lm_reference.py (transformers {transformers.__version__}, torch "
                    f"{torch.__version__}, float64, float64 RoPE angles)",
        "greedy_prompt_text": GREEDY_PROMPT,
        "greedy_text": sp.decode(continuation),
        "greedy_min_top2_gap": min(gaps),
        "greedy_note": "greedy_continuation_ids are the 40 tokens that greedy decoding produces after greedy_prompt_ids "
                       "([BOS] + encode(greedy_prompt_text)); greedy_text is their decoding",
        "perplexity_protocol": "ids = [BOS] + sentencepiece.encode(whole file); split into consecutive non-overlapping "
                               "windows of `window` tokens (the last may be shorter); in each window every token except "
                               "the window's first is scored given the window's preceding tokens; ppl = exp(total NLL / "
                               "tokens_scored); only the first max_windows windows when set",
        "perplexity": perplexity,
    }
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(reference, f, indent=2)
        f.write("\n")
    print(json.dumps(reference, indent=2))


if __name__ == "__main__":
    main()
