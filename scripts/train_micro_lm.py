#!/usr/bin/env python3
"""Trains kvc-micro-lm: a Llama small enough to live in the repository (under 2 MB of float32 weights) that still
finds one needle fact in a haystack, so that needle, retrieval and low-rank tests have a real signal to lose.

A developer tool (PyTorch + transformers), not a runtime dependency of kvc. The text comes from a folder laid out
like ../shared/data (the first 95% of every file trains, the rest is held out); the tokenizer is kvc-tiny-lm's
2048-piece SentencePiece model, so both models read text the same way.

  python3 scripts/train_micro_lm.py --data ../shared/data --tokenizer data/models/kvc-micro-lm/tokenizer.model \\
      --out /tmp/kvc-micro-lm --steps 3000

Sequences mix natural text, needle retrieval in the question forms kvc-eval needle asks (secret number and pass
key, one to three needles per haystack) and copy tasks that teach the attention to look things up (the whole
batch, of random pieces, for the first 15% of the run: in a mix from the start, look-back attention had not
formed after 7M tokens). Each sequence
starts with <s>; lengths grow from 128 to 1024 tokens over the run with a constant number of tokens per step.
The output folder holds config.json, model.safetensors (tied embeddings), the tokenizer and train_log.json.
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import sys
import time

import sentencepiece as spm
import torch
import transformers

HELD_OUT_FRACTION = 0.05
DIGITS = 5

ADJECTIVES = (
    "amber ancient angry bitter blazing bold brave bright broken calm careful cheerful clever cold crimson curious "
    "dusty eager elegant empty fancy fierce frozen gentle giant golden graceful hidden hollow humble icy jolly lively "
    "lonely lucky marble mighty misty modest noble purple quiet rapid royal rusty scarlet silent silver sleepy smooth "
    "solemn spotted steady stormy sturdy swift tender tiny velvet violet wandering wicked wise wooden yellow").split()
NOUNS = (
    "anchor apple arrow badger banner barrel basket beacon bell blanket bottle bridge bucket cabin camel candle "
    "canyon carpet castle cellar chapel cherry chimney church cliff clock cloud comet compass cottage crown crystal "
    "dagger desert diamond dolphin dragon drum eagle engine falcon feather ferry fiddle flute forest fountain galaxy "
    "garden glacier goblet harbor harp hammer helmet island jacket jungle kettle kingdom ladder lantern lemon library "
    "lighthouse lizard locket magnet meadow mirror monkey mountain needle oasis orchard otter palace parrot pebble "
    "pencil pepper piano pigeon pillow planet pocket puzzle pyramid quarry rabbit raven ribbon river rocket saddle "
    "sailor scroll ship shovel spider statue stone temple thimble tiger tower trumpet tunnel turtle umbrella valley "
    "violin volcano wagon walrus whistle window wizard").split()


def config(vocab_size):
    return transformers.LlamaConfig(
        vocab_size=vocab_size, hidden_size=96, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, max_position_embeddings=1024, rms_norm_eps=1e-5, rope_theta=10000.0,
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, attention_bias=False, mlp_bias=False,
        hidden_act="silu", initializer_range=0.02)


class Corpus:
    """Every text file under a folder, split into a training head and a held-out tail, tokenized once."""

    def __init__(self, folder, sp, split):
        self.texts, self.tokens = [], []
        self.vocab_size = sp.get_piece_size()
        for root, _, files in sorted(os.walk(folder)):
            for name in sorted(files):
                if not name.endswith((".txt", ".raw")):
                    continue
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    text = f.read()
                cut = int(len(text) * (1 - HELD_OUT_FRACTION))
                part = text[:cut] if split == "train" else text[cut:]
                if len(part) < 200:
                    continue
                self.texts.append(part)
                self.tokens.append(sp.encode(part))
        if not self.texts:
            sys.exit(f"train_micro_lm: no .txt or .raw files under {folder}")
        sizes = [len(t) for t in self.tokens]
        # Large files are sampled less than in proportion, so short essays still show up.
        self.weights = [math.sqrt(s) for s in sizes]

    def pick(self, rng):
        return rng.choices(range(len(self.texts)), weights=self.weights)[0]

    def token_window(self, rng, length):
        k = self.pick(rng)
        toks = self.tokens[k]
        if len(toks) <= length:
            return (toks * (length // max(1, len(toks)) + 1))[:length]
        start = rng.randrange(0, len(toks) - length)
        return toks[start:start + length]

    def sentences(self, rng, chars):
        """Consecutive sentences (about `chars` characters) from a random place in a random file."""
        text = self.texts[self.pick(rng)]
        start = rng.randrange(0, max(1, len(text) - chars))
        piece = text[start:start + chars]
        parts = [s.strip() for s in re.split(r"(?<=[.!?])\s+", piece)]
        return [s for s in parts[1:-1] if s] or [piece.strip()]


def number(rng):
    return "".join(str(rng.randrange(10)) for _ in range(DIGITS))


def needle_forms(rng):
    """(needle sentence, question, answer) with a fresh entity and number."""
    n = number(rng)
    if rng.random() < 0.25:
        return (f"The pass key is {n}. Remember it. {n} is the pass key.", "What is the pass key? The pass key is", n)
    e = f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
    return (f"The secret number of the {e} is {n}.",
            f"What is the secret number of the {e}? The secret number of the {e} is", n)


def needle_sequence(corpus, sp, rng, length, chars_per_token):
    """Haystack sentences with 1-3 needles at sentence boundaries, then the question(s) and answers.
    Returns token ids (with <s>) and a mask of the answer digits."""
    count = rng.choice([1, 1, 1, 2, 3])
    facts, seen = [], set()
    while len(facts) < count:
        fact = needle_forms(rng)
        if fact[1] not in seen:
            seen.add(fact[1])
            facts.append(fact)
    asked = rng.sample(facts, rng.randint(1, count))
    tail_text = "".join(f"\n{q} {a}." for _, q, a in asked)
    budget = length - 1 - len(sp.encode(tail_text)) - sum(len(sp.encode(f[0])) + 1 for f in facts)
    for _ in range(4):
        sentences = corpus.sentences(rng, int(max(budget, 8) * chars_per_token))
        for fact in facts:
            sentences.insert(rng.randint(0, len(sentences)), fact[0])
        context = " ".join(sentences)
        ids = [1] + sp.encode(context + tail_text)
        if len(ids) <= length:
            break
        budget = int(budget * length / len(ids) * 0.97)
    ids = ids[:length]
    answer = [0] * len(ids)
    # Mark each asked answer's digits (the pieces after the question's last token).
    text = context
    for _, q, a in asked:
        prefix = [1] + sp.encode(text + f"\n{q} ")
        text += f"\n{q} {a}."
        full = [1] + sp.encode(text)
        for i in range(len(prefix) - 1, min(len(full), len(ids))):
            answer[i] = 1
    return ids, answer


def copy_sequence(corpus, rng, length, random_share):
    """A, then B, then A again: the second A is predictable only by looking back. A is random pieces with
    probability random_share (nothing but the look-back predicts them, which is what starts the attention's
    copying) and a window of text otherwise; B is text."""
    a_len = rng.randint(16, max(17, length // 3))
    b_len = rng.randint(0, length - 1 - 2 * a_len)
    a = [rng.randrange(3, corpus.vocab_size) for _ in range(a_len)] if rng.random() < random_share else corpus.token_window(rng, a_len)
    ids = [1] + a + corpus.token_window(rng, b_len) + a
    ids = ids[:length]
    return ids, [0] * len(ids)


def text_sequence(corpus, rng, length):
    ids = [1] + corpus.token_window(rng, length - 1)
    return ids, [0] * len(ids)


def batch(corpus, sp, rng, length, size, chars_per_token, mix, random_share):
    rows, weights = [], []
    for _ in range(size):
        r = rng.random()
        if r < mix[0]:
            ids, ans = text_sequence(corpus, rng, length)
        elif r < mix[0] + mix[1]:
            ids, ans = needle_sequence(corpus, sp, rng, length, chars_per_token)
        else:
            ids, ans = copy_sequence(corpus, rng, length, random_share)
        pad = length - len(ids)
        rows.append(ids + [0] * pad)
        weights.append([1.0 + 4.0 * x for x in ans] + [0.0] * pad)
    ids = torch.tensor(rows)
    w = torch.tensor(weights)
    return ids, w


def length_at(step, steps, schedule):
    """schedule: [(fraction of the run, length)], in order."""
    done = 0.0
    for fraction, length in schedule:
        done += fraction
        if step < done * steps:
            return length
    return schedule[-1][1]


@torch.no_grad()
def needle_accuracy(model, corpus, sp, rng, length, samples):
    """Share of held-out needle samples whose answer digits are all the model's top prediction given the
    prompt and the digits before them: exactly the samples greedy decoding answers, in one forward pass."""
    model.eval()
    correct = 0
    for _ in range(samples):
        needle, question, answer = needle_forms(rng)
        tail = len(sp.encode(f"\n{question} {answer}.")) + len(sp.encode(needle)) + 2
        for _ in range(4):
            sentences = corpus.sentences(rng, int((length - tail) * 2.9))
            sentences.insert(rng.randint(0, len(sentences)), needle)
            context = " ".join(sentences) + f"\n{question}"
            ids = [1] + sp.encode(context + f" {answer}.")
            if len(ids) <= length:
                break
        first = len([1] + sp.encode(context))
        digits = len(ids) - 1 - first  # the pieces of " {answer}" (the final "." excluded)
        logits = model(torch.tensor([ids])).logits[0]
        predicted = logits[first - 1:first - 1 + digits].argmax(-1)
        correct += bool((predicted == torch.tensor(ids[first:first + digits])).all())
    model.train()
    return correct / samples


@torch.no_grad()
def held_out_loss(model, corpus, rng, length, windows):
    model.eval()
    total = 0.0
    for _ in range(windows):
        ids = torch.tensor([[1] + corpus.token_window(rng, length - 1)])
        total += model(ids, labels=ids).loss.item()
    model.train()
    return total / windows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder of .txt/.raw files (e.g. ../shared/data)")
    ap.add_argument("--tokenizer", required=True, help="SentencePiece model (kvc-tiny-lm's tokenizer.model)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--tokens-per-step", type=int, default=8192)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-every", type=int, default=500)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
    train = Corpus(args.data, sp, "train")
    held = Corpus(args.data, sp, "held_out")
    chars_per_token = sum(len(t) for t in train.texts) / sum(len(t) for t in train.tokens)

    cfg = config(sp.get_piece_size())
    model = transformers.LlamaForCausalLM(cfg)
    params = sum(p.numel() for p in model.parameters())
    print(f"{params} parameters, {train.tokens.__len__()} files, {sum(map(len, train.tokens))} training tokens, "
          f"{chars_per_token:.2f} chars/token", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    warmup = max(1, args.steps // 30)
    schedule = [(0.15, 128), (0.25, 256), (0.35, 512), (0.25, 1024)]
    # (text, needle) shares; the rest is copy tasks. The first 15% of the run copies random pieces only, so
    # that look-back attention forms before the needles need it (in a mix it had not formed after 7M tokens).
    early = args.steps * 15 // 100
    log = {"config": cfg.to_dict(), "args": vars(args), "parameters": params, "evals": []}
    tokens_seen = 0
    start = time.time()
    model.train()
    for step in range(args.steps):
        length = length_at(step, args.steps, schedule)
        size = max(1, args.tokens_per_step // length)
        if step < early:
            ids, weights = batch(train, sp, rng, length, size, chars_per_token, (0.0, 0.0), 1.0)
        else:
            ids, weights = batch(train, sp, rng, length, size, chars_per_token, (0.45, 0.40), 0.5)
        lr = args.lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        logits = model(ids).logits[:, :-1].float()
        target = ids[:, 1:]
        w = weights[:, 1:]
        nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                                reduction="none").view_as(w)
        loss = (nll * w).sum() / (w > 0).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens_seen += int((w > 0).sum())
        if step % 50 == 0:
            print(f"step {step} len {length} loss {loss.item():.3f} lr {lr:.2e} tokens {tokens_seen} "
                  f"{tokens_seen / (time.time() - start):.0f} tok/s", flush=True)
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            erng = random.Random(1234)
            entry = {"step": step + 1, "tokens": tokens_seen, "secs": time.time() - start,
                     "held_out_loss_512": held_out_loss(model, held, erng, 512, 8),
                     "needle": {str(n): needle_accuracy(model, held, sp, erng, n, 40) for n in (256, 512, 1024)}}
            log["evals"].append(entry)
            print(json.dumps(entry), flush=True)
            save(model, cfg, args, log)
    save(model, cfg, args, log)


def save(model, cfg, args, log):
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    shutil.copy(args.tokenizer, os.path.join(args.out, "tokenizer.model"))
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump(log, f, indent=1)


if __name__ == "__main__":
    main()
