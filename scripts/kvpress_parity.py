#!/usr/bin/env python3
"""Kept-entry parity between kvc's presses and NVIDIA's kvpress on the same model and prompt.

For every method both implement, at ratios 0.25/0.5/0.75/0.9, on stories260K, kvc-micro-lm and kvc-tiny-lm
(Hugging Face folders loaded with transformers' LlamaForCausalLM) and on Gemma 3 270M (the GGUF
scripts/setup.sh installs, loaded by transformers as Gemma3ForCausalLM), this runs kvpress on a fixed prompt,
records the positions each layer x KV head keeps, writes them as golden files under data/parity/
(ids only: the prompt's token ids and the kept positions), then runs kvc-generate --dump-kept with the
kvc parameters that reproduce kvpress and prints the mean Jaccard(kvc, kvpress) per method x model x
ratio (Markdown). tests/core/test_press_parity.cpp checks the golden files without Python.

On Gemma 3 only the global layers are compared (and stored): kvc compresses those alone, since a
sliding-window layer is bounded by its window already. kvpress skips the sliding layers of
Gemma3ForConditionalGeneration but hooks every layer of Gemma3ForCausalLM; its compression runs after each
layer's prefill attention, so the global layers see the same hidden states either way. PyramidKV and
KVCompose split one budget over layers, which kvpress does over all 18 layers and kvc over the 3 global
ones, so they are not compared on Gemma 3.

Needs kvpress, transformers, torch, sentencepiece and safetensors, and gguf for Gemma 3 (not dependencies of
kvc or CI):
    python -m venv VENV && VENV/bin/pip install kvpress transformers torch sentencepiece
    VENV/bin/python scripts/kvpress_parity.py --build build [--out data/parity] > parity.md
"""
import argparse
import importlib.metadata
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import sentencepiece
import torch
from transformers import AutoModelForCausalLM
from safetensors.numpy import load_file, save_file
import transformers
from transformers import DynamicCache, LlamaForCausalLM

import kvpress

ROOT = Path(__file__).resolve().parent.parent
PROMPT_TOKENS = 200  # a multiple of 20, so that every ratio keeps a whole number of entries (up to float rounding)
WINDOW = 16  # SnapKV/PyramidKV/Ada observation window on both sides: at 200 tokens kvpress' default (64)
# would exceed the budget at 0.75 and 0.9, where its ties among window entries are broken arbitrarily.
RATIOS = [0.25, 0.5, 0.75, 0.9]
SKETCH = 1024  # LeverageScore's Gaussian sketch width on kvpress' side (above every head size compared)
MODELS = {
    "stories260K": "data/text/tinystories/tinystories_excerpt_30k.txt",
    "kvc-micro-lm": "data/text/pg_essays",
    "kvc-tiny-lm": "data/text/pg_essays",
    "gemma3-270m": "data/text/pg_essays",
}
GGUF_MODELS = {"gemma3-270m"}
OUTSIDE_MODELS = GGUF_MODELS | {"kvc-tiny-lm"}  # not in data/models: scripts/model_path.sh NAME
# Budgets split over layers (see above); kvpress' KVzip refuses Gemma 3; LU-KV's curve rows are every layer's
# in kvpress, the global layers' in kvc; a cut while decoding shortens the global layers' caches only (as kvc
# cuts them), and transformers sizes every layer's attention mask by the first (sliding) layer's cache.
NOT_ON_GGUF_MODELS = {"pyramidkv", "pyramidkv_beta2", "kvcompose", "kvzip", "kvzip_layerwise", "lukv_keydiff",
                      "decoding_keydiff", "decoding_fraction_keydiff", "decoding_snapkv", "prefill_decoding_keydiff"}


def model_path(model):
    if model in OUTSIDE_MODELS:
        return subprocess.run([str(ROOT / "scripts/model_path.sh"), model], check=True, capture_output=True,
                              text=True).stdout.strip()
    return str(ROOT / "data/models" / model)


def prompt_text(model):
    path = ROOT / MODELS[model]
    if path.is_dir():
        path = sorted(p for p in path.iterdir() if p.is_file())[0]
    return path.read_text()[:6000]


def prompt_ids(model, build):
    if model in GGUF_MODELS:
        # The ids are the shared input, not what is compared: kvc's tokenizer agrees with llama.cpp's and
        # SentencePiece's on this vocabulary (README), so kvc-tokenize provides them.
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(prompt_text(model))
        out = subprocess.run([str(build / "bin/kvc-tokenize"), "-m", model_path(model), "-f", f.name, "--json"],
                             check=True, capture_output=True, text=True).stdout
        Path(f.name).unlink()
        return json.loads(out)["ids"][:PROMPT_TOKENS]
    folder = Path(model_path(model))
    sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    cfg = json.loads((folder / "config.json").read_text())
    ids = [cfg["bos_token_id"]] + sp.encode(prompt_text(model))
    return ids[:PROMPT_TOKENS]


def n_kept(ratio):
    return kvpress.utils.compute_n_kept(PROMPT_TOKENS, ratio)


def kept_entries(ratio):
    """n_kept(ratio) in a spec; the table's header row names it for the symbolic ratio R."""
    return f"n_kept({ratio})" if isinstance(ratio, str) else n_kept(ratio)


# method -> (kvpress press for a ratio, kvc --press spec, kvc budget flag for a ratio, note)
METHODS = {
    "streaming_llm": (lambda r: kvpress.StreamingLLMPress(compression_ratio=r, n_sink=4),
                      "streaming_llm:sinks=4", lambda r: ["--budget", str(n_kept(r))]),
    "snapkv": (lambda r: kvpress.SnapKVPress(compression_ratio=r, window_size=WINDOW, kernel_size=5),
               f"snapkv:window={WINDOW},kernel=5,pad=zeros,pool=context", lambda r: ["--budget", str(n_kept(r))]),
    "tova": (lambda r: kvpress.TOVAPress(compression_ratio=r), "tova:heads=shared",
             lambda r: ["--budget", str(n_kept(r))]),
    "knorm": (lambda r: kvpress.KnormPress(compression_ratio=r), "knorm", lambda r: ["--budget", str(n_kept(r))]),
    "observed_attention": (lambda r: kvpress.ObservedAttentionPress(compression_ratio=r), "h2o:recent=0,average=1",
                           lambda r: ["--budget", str(n_kept(r))]),
    "pyramidkv": (lambda r: kvpress.PyramidKVPress(compression_ratio=r, window_size=WINDOW, kernel_size=5, beta=20),
                  f"pyramidkv:window={WINDOW},kernel=5,pad=zeros,pool=context,schedule=kvpress",
                  lambda r: ["--ratio", str(r)]),
    # β = 2 takes kvpress' linear schedule at this prompt length (at β = 20 it falls back to uniform budgets).
    "pyramidkv_beta2": (lambda r: kvpress.PyramidKVPress(compression_ratio=r, window_size=WINDOW, kernel_size=5, beta=2),
                        f"pyramidkv:window={WINDOW},kernel=5,pad=zeros,pool=context,schedule=kvpress,beta=2",
                        lambda r: ["--ratio", str(r)]),
    "kvcompose": (lambda r: kvpress.KVComposePress(compression_ratio=r), "kvcompose:task=repeat,kernel=1,first_layer_max=1",
                  lambda r: ["--ratio", str(r)]),
    "ada_snapkv": (lambda r: kvpress.AdaKVPress(kvpress.SnapKVPress(compression_ratio=r, window_size=WINDOW,
                                                                    kernel_size=5), alpha_safeguard=0.2),
                   f"ada:base=snapkv,window={WINDOW},kernel=5,pad=zeros,pool=context,safeguard=0.2",
                   lambda r: ["--budget", str(n_kept(r))]),
    "keydiff": (lambda r: kvpress.KeyDiffPress(compression_ratio=r), "keydiff", lambda r: ["--budget", str(n_kept(r))]),
    "expected_attention": (lambda r: kvpress.ExpectedAttentionPress(compression_ratio=r), "expected_attention",
                           lambda r: ["--budget", str(n_kept(r))]),
    # lag 32: kvpress' default of 128 needs prompts of 260 tokens or more before it scores anything.
    "lagkv": (lambda r: kvpress.LagKVPress(compression_ratio=r, lag_size=32), "lagkv:lag=32",
              lambda r: ["--budget", str(n_kept(r))]),
    # lag 8: the sinks and the last partition (16 entries) fit every budget here, and cross scores do not tie.
    "lagkv_cross": (lambda r: kvpress.LagKVPress(compression_ratio=r, lag_size=8, cross_scoring=True),
                    "lagkv:lag=8,cross=1", lambda r: ["--budget", str(n_kept(r))]),
    # kvpress sketches the keys with torch's global RNG; a sketch wider than any head here keeps the leverage
    # close to the exact one kvc computes (leverage.cpp).
    "leverage": (lambda r: kvpress.LeverageScorePress(compression_ratio=r, sketch_dimension=SKETCH), "leverage",
                 lambda r: ["--budget", str(n_kept(r))]),
    # chunks that tile the prompt: kvpress pads a shorter last chunk with keys masked by -1e-9 (non_causal_attention.cpp).
    "non_causal_attention": (lambda r: kvpress.NonCausalAttnPress(compression_ratio=r, chunk_size=100),
                             "non_causal_attention:chunk=100", lambda r: ["--budget", str(n_kept(r))]),
    "cur": (lambda r: kvpress.CURPress(compression_ratio=r), "cur", lambda r: ["--budget", str(n_kept(r))]),
    # 200 - 8 sinks - 4 recent = 188 = 2 chunks of 94; blend = the ratio, as kvpress' default.
    "compactor": (lambda r: kvpress.CompactorPress(compression_ratio=r, chunk_size=94, sketch_dimension=SKETCH),
                  lambda r: f"compactor:chunk=94,blend={r}", lambda r: ["--budget", str(n_kept(r))]),
    # kvpress' SnapKV averages the window's attention, kvc's sums it: epsilon x window on kvc's side.
    "criticalkv_snapkv": (lambda r: kvpress.CriticalKVPress(kvpress.SnapKVPress(compression_ratio=r, window_size=WINDOW,
                                                                                kernel_size=5)),
                          f"criticalkv:base=snapkv,window={WINDOW},kernel=5,pad=zeros,pool=context,epsilon={WINDOW * 1e-4:g}",
                          lambda r: ["--budget", str(n_kept(r))]),
    "cap": (lambda r: kvpress.CapPress(compression_ratio=r), "cap", lambda r: ["--budget", str(n_kept(r))]),
    "criticalkv_ada_snapkv": (lambda r: kvpress.CriticalAdaKVPress(kvpress.SnapKVPress(compression_ratio=r, window_size=WINDOW,
                                                                                      kernel_size=5)),
                              f"criticalkv_ada:base=snapkv,window={WINDOW},kernel=5,pad=zeros,pool=context,"
                              f"epsilon={WINDOW * 1e-4:g},safeguard=0.2", lambda r: ["--budget", str(n_kept(r))]),
    # blocks of 32 joining what is held (the KeyDiff paper's streaming compression).
    "block_keydiff": (lambda r: kvpress.BlockPress(kvpress.KeyDiffPress(compression_ratio=r), block_size=32),
                      "block:base=keydiff,size=32", lambda r: ["--budget", str(n_kept(r))]),
    # chunks of 64, 64, 64 and 8 tokens, each keeping its share: the shares of kvc's budget are kvpress' counts.
    "chunk_keydiff": (lambda r: kvpress.ChunkPress(kvpress.KeyDiffPress(compression_ratio=r), chunk_length=64),
                      "chunk:base=keydiff,size=64", lambda r: ["--budget", str(n_kept(r))]),
    # chunks of 20 (kvpress' default): whole chunks, the same for every head, floor(10 chunks x (1 - r)) of them.
    "chunkkv_snapkv": (lambda r: kvpress.ChunkKVPress(kvpress.SnapKVPress(compression_ratio=r, window_size=WINDOW,
                                                                          kernel_size=5), chunk_length=20),
                       f"chunkkv:base=snapkv,window={WINDOW},kernel=5,pad=zeros,pool=context,size=20",
                       lambda r: ["--budget", str(n_kept(r))]),
    # The sweep's value sets the threshold: keys whose cosine to the mean key exceeds it leave (KeyDiff's score is
    # minus that cosine); the last 16 entries stay.
    "dms_keydiff": (lambda r: kvpress.DMSPress(kvpress.KeyDiffPress(), threshold=-r, sliding_window_size=16),
                    lambda r: f"dms:base=keydiff,threshold=-{r},window=16", lambda r: []),
    # Cuts while decoding: every 8 decode passes each layer's whole cache is ranked by KeyDiff and cut to the
    # ratio's budget of the prompt (decoding_keydiff), to the share of the tokens seen (decoding_fraction_keydiff,
    # kvpress' CompressionRatioDecodingPress), or the prompt is compressed to that budget first and the cache cut
    # back to it (prefill_decoding_keydiff, kvpress' PrefillDecodingPress with KeyDiff on both sides).
    "decoding_keydiff": (lambda r: kvpress.DecodingPress(kvpress.KeyDiffPress(), compression_interval=DECODE_INTERVAL,
                                                         target_size=n_kept(r)),
                         lambda r: f"decoding:base=keydiff,interval={DECODE_INTERVAL},target={kept_entries(r)}", lambda r: []),
    "decoding_fraction_keydiff": (lambda r: kvpress.CompressionRatioDecodingPress(
                                      kvpress.KeyDiffPress(), target_compression_ratio=r,
                                      compression_interval=DECODE_INTERVAL),
                                  lambda r: f"decoding:base=keydiff,interval={DECODE_INTERVAL},fraction={r}",
                                  lambda r: []),
    # SnapKV ranks by the attention of the last 4 of the 8 queries decoded since the last cut (kvpress asks for
    # more buffered hidden states than its window), with each query rotated at its own position
    # (rotate_buffered_queries_at_their_positions) and no pooling (kernel 1): kvpress keeps a cut's survivors in
    # the order of their scores, so its pooling at the next cut averages neighbours in that order; kvc pools
    # neighbours by position. docs/eviction.md gives the Jaccard of kvpress as it is.
    "decoding_snapkv": (lambda r: kvpress.DecodingPress(kvpress.SnapKVPress(window_size=DECODE_INTERVAL // 2, kernel_size=1),
                                                        compression_interval=DECODE_INTERVAL, target_size=n_kept(r)),
                        lambda r: f"decoding:base=snapkv,window={DECODE_INTERVAL // 2},kernel=1,pad=zeros,pool=context,"
                                  f"interval={DECODE_INTERVAL},target={kept_entries(r)}", lambda r: []),
    "prefill_decoding_keydiff": (lambda r: kvpress.PrefillDecodingPress(
                                     prefilling_press=kvpress.KeyDiffPress(compression_ratio=r),
                                     decoding_press=kvpress.DecodingPress(kvpress.KeyDiffPress(),
                                                                          compression_interval=DECODE_INTERVAL,
                                                                          target_size=n_kept(r))),
                                 lambda r: f"decoding:base=keydiff,interval={DECODE_INTERVAL},target={kept_entries(r)}",
                                 lambda r: ["--budget", str(n_kept(r))]),
    # The same while decoding: CONTINUATION greedy tokens fed one at a time after the prompt, each scored on its
    # own; the golden files hold the tokens kvpress generated and what each head holds at the end.
    "dms_keydiff_decoding": (lambda r: kvpress.DMSPress(kvpress.KeyDiffPress(), threshold=-r, sliding_window_size=16,
                                                        decoding=True),
                             lambda r: f"dms:base=keydiff,threshold=-{r},window=16,decoding=1", lambda r: []),
    # The question is the prompt's last 16 tokens (kvpress finds it by a delimiter token inserted before it; kvc
    # is told its length). Keys compared before re-rotation, which moves them (key_rerotation's own parity).
    "finch": (lambda r: kvpress.FinchPress(compression_ratio=r, rerotate_keys=False), "finch:window=16,rerotate=0",
              lambda r: ["--budget", str(n_kept(r))]),
    # Chunks of 100: kvpress asserts chunk > window / (1 - ratio), which 0.9 (160) breaks.
    "finch_chunked": (lambda r: kvpress.FinchPress(compression_ratio=r, rerotate_keys=False, chunk_length=100),
                      "finch:window=16,chunk=100,rerotate=0", lambda r: ["--budget", str(n_kept(r))]),
    # Evicted values folded into their most similar kept entry: the golden files also hold the kept values.
    "merging_knorm": (lambda r: kvpress.MergingPress(press=kvpress.KnormPress(compression_ratio=r)), "merging:base=knorm",
                      lambda r: ["--budget", str(n_kept(r))]),
    "merging_snapkv_gated": (lambda r: kvpress.MergingPress(press=kvpress.SnapKVPress(compression_ratio=r,
                                                                                      window_size=WINDOW, kernel_size=5),
                                                            similarity_threshold=0.2, merge_fraction=0.75),
                             f"merging:base=snapkv,window={WINDOW},kernel=5,pad=zeros,pool=context,similarity=0.2,"
                             "fraction=0.75", lambda r: ["--budget", str(n_kept(r))]),
    # One budget over layers and heads: kvc's round(S (1 - r)) per head keeps kvpress' numel - int(numel r) at
    # these ratios (int(S (1 - r)) would keep one fewer per head at 0.9).
    "kvzip": (lambda r: kvpress.KVzipPress(compression_ratio=r), "kvzip", lambda r: ["--ratio", str(r)]),
    "kvzip_layerwise": (lambda r: kvpress.KVzipPress(compression_ratio=r, layerwise=True), "kvzip:layerwise=1",
                        lambda r: ["--ratio", str(r)]),
    # The sweep's value is the lazy threshold (SimLayerKV sizes itself); 64 recent entries at 200 tokens.
    "simlayerkv": (lambda r: kvpress.SimLayerKVPress(lazy_threshold=r, n_recent=64),
                   lambda r: f"simlayerkv:threshold={r},recent=64", lambda r: []),
    # A budget curve made here (lukv_curve below; kvpress downloads the authors' for Llama-3.1-8B only): heads
    # prune shares around the ratio, kvc reads the same curve from data/lukv/.
    "lukv_keydiff": (lambda r: kvpress.LUKVPress(kvpress.KeyDiffPress(), compression_ratio=r, sink=4, window=1),
                     None, lambda r: ["--ratio", str(r)]),
    # The sweep's value is the share of key channels pruned; the golden files hold the kept channels.
    "think": (lambda r: kvpress.ThinKPress(key_channel_compression_ratio=r), lambda r: f"think:channels={r}",
              lambda r: []),
}
# Methods whose golden files hold kept key channels per layer x head (channels.l.h of --dump-kept), not positions.
CHANNEL_METHODS = {"think"}
# Methods that rewrite kept values: their golden files also hold them (values.l.h, [kept, head_dim], by position).
VALUE_METHODS = {"merging_knorm", "merging_snapkv_gated"}


# Ratios left out where kvpress' own selection is arbitrary: LagKV (lag 32) scores ranks within partitions,
# which tie across its 5 partitions (budgets of 0.25-0.75 take whole tie groups), and at 0.9 its 40 entries of
# equal top score (sinks and last partition) exceed the 19 kept, among which torch.topk picks any.
METHOD_RATIOS = {"lagkv": [0.25, 0.5, 0.75], "finch_chunked": [0.25, 0.5, 0.75]}
FINCH_QUESTION = 16  # the question's tokens in FINCH's rows
# Methods that also compress while decoding: CONTINUATION greedy tokens follow the prompt, one forward pass each.
CUT_DECODING_METHODS = {"decoding_keydiff", "decoding_fraction_keydiff", "decoding_snapkv", "prefill_decoding_keydiff"}
DECODING_METHODS = {"dms_keydiff_decoding"} | CUT_DECODING_METHODS
CONTINUATION = 24
DECODE_INTERVAL = 8  # 24 decode passes: three cuts


def lukv_curve_path(model):
    return f"data/lukv/{model}_parity_curve.safetensors"


def lukv_curve(num_layers, num_kv_heads):
    """[99, L, KV]: at compression ratio (t + 1) / 100 head h of layer l prunes that share +- 0.15, within [0, 0.98]."""
    import numpy as np
    t = (np.arange(99) + 1)[:, None, None] / 100
    offset = 0.15 * (((np.arange(num_layers)[:, None] + 2 * np.arange(num_kv_heads)[None, :]) % 3) - 1)
    return np.clip(t + offset[None], 0.0, 0.98).astype(np.float32)


def write_lukv_curve(model, num_layers, num_kv_heads):
    """The curve as kvc-profile writes one (no config_hash: kvc checks its shape against the model)."""
    path = ROOT / lukv_curve_path(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"lukv_prune": lukv_curve(num_layers, num_kv_heads)}, str(path),
              metadata={"lukv_press": "keydiff", "lukv_sink": "4", "lukv_recent": "1",
                        "tool": "scripts/kvpress_parity.py"})


def kvc_spec(method, ratio, model=None):
    if method == "lukv_keydiff":
        return f"lukv:curve={lukv_curve_path(model or 'MODEL')}"
    spec = METHODS[method][1]
    return spec(ratio) if callable(spec) else spec


def positions_of_rows(kept_keys, all_keys):
    """The position of each row of kept_keys [n, d] in all_keys [S, d] (gathered copies: exact matches)."""
    eq = (kept_keys[:, None, :] == all_keys[None, :, :]).all(-1)
    assert bool(eq.any(1).all()), "a kept key matches no prompt key"
    return [int(i) for i in eq.float().argmax(1)]


def rows_in(kept_keys, all_keys):
    """Positions of the rows of kept_keys [n, d] in all_keys [S, d], ascending."""
    return sorted(positions_of_rows(kept_keys, all_keys))


_loaded = {}


def track_cut_positions(press, kept, L, KV, prompt_tokens):
    """Keeps kept[(l, h)] as the positions of the rows each head's cache holds, in cache order, through a
    DecodingPress's cuts (which gather rows, so a row's position is found by its key among those before the
    cut) and, for a PrefillDecodingPress, its prefill compression."""
    decoding = getattr(press, "decoding_press", press)
    prefill = getattr(press, "prefilling_press", None)
    for l in range(L):
        for h in range(KV):
            kept[(l, h)] = list(range(prompt_tokens))

    def follow(l, out_keys, keys):
        for h in range(KV):
            before = kept[(l, h)]
            kept[(l, h)] = [before[i] for i in positions_of_rows(out_keys[0, h], keys[0, h])]

    def wrap_compress(target):
        original = target.compress

        def compress(module, hidden_states, keys, values, attentions, kwargs):
            out_keys, out_values = original(module, hidden_states, keys, values, attentions, kwargs)
            follow(int(module.layer_idx), out_keys, keys)
            return out_keys, out_values

        target.compress = compress

    wrap_compress(decoding)
    if prefill is not None:
        wrap_compress(prefill)
    original_hook = decoding.forward_hook

    def forward_hook(module, inputs, kwargs, output):
        # A decode pass appends its token's entry before the hook may cut.
        if not kvpress.presses.base_press.is_prefilling(kwargs["cache_position"], kwargs["hidden_states"].shape[1]):
            position = int(kwargs["position_ids"][0, -1])
            CURRENT_POSITION[0] = position
            for h in range(KV):
                kept[(int(module.layer_idx), h)].append(position)
        return original_hook(module, inputs, kwargs, output)

    decoding.forward_hook = forward_hook


def compress_global_layers_only(press, layers):
    """kvc leaves Gemma 3's sliding-window layers to their window; kvpress hooks every layer of
    Gemma3ForCausalLM. At prefill that changes nothing in the global layers (each layer compresses after its
    own attention), but while decoding it changes the tokens, so the press is kept off the sliding layers."""
    original = press.forward_hook

    def forward_hook(module, inputs, kwargs, output):
        return original(module, inputs, kwargs, output) if int(module.layer_idx) in layers else output

    press.forward_hook = forward_hook


def rotate_buffered_queries_at_their_positions(model):
    """kvpress' SnapKV, scoring while decoding, rotates every buffered query with the RoPE of the pass's one
    token (position_embeddings holds one position then); this gives each its own position, as kvc does. The
    buffered hidden states are the last consecutive decode passes, ending at the current one."""
    snapkv = kvpress.presses.snapkv_press.SnapKVPress
    original = snapkv.compute_window_attention

    def compute_window_attention(module, hidden_states, keys, window_size, position_embeddings):
        if position_embeddings[0].shape[1] < window_size:
            last = CURRENT_POSITION[0]
            positions = torch.arange(last - hidden_states.shape[1] + 1, last + 1)[None]
            position_embeddings = model.model.rotary_emb(hidden_states, positions)
        return original(module, hidden_states, keys, window_size, position_embeddings)

    snapkv.compute_window_attention = staticmethod(compute_window_attention)
    return lambda: setattr(snapkv, "compute_window_attention", staticmethod(original))


CURRENT_POSITION = [0]  # the decode pass's position, set by track_cut_positions' hook


def default_to_global_rope():
    """kvpress' ExpectedAttention and CAP call the model's rotary embedding without a layer type, which
    Gemma 3's (one per layer type in transformers 5) refuses: without one it answers with the global layers'
    RoPE, the layers compared here (the model's own calls name their type)."""
    from transformers.models.gemma3 import modeling_gemma3
    rotary = modeling_gemma3.Gemma3RotaryEmbedding
    if getattr(rotary, "_kvc_parity_default", False):
        return
    forward = rotary.forward

    def with_default(self, x, position_ids, layer_type=None):
        return forward(self, x, position_ids, "full_attention" if layer_type is None else layer_type)

    rotary.forward = with_default
    rotary._kvc_parity_default = True


def load_model(model_dir, attn):
    if (model_dir, attn) not in _loaded:
        if model_dir.endswith(".gguf"):
            default_to_global_rope()
            path = Path(model_dir)
            model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                         attn_implementation=attn)
        else:
            model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn)
        _loaded[(model_dir, attn)] = model.eval()
    return _loaded[(model_dir, attn)]


def compared_layers(model):
    """The layers kvc compresses: the global ones when the model interleaves sliding-window layers."""
    types = getattr(model.config, "layer_types", None)
    if not types:
        return list(range(model.config.num_hidden_layers))
    return [l for l, t in enumerate(types) if t == "full_attention"]


class SentencePieceTokenizer:
    """What KVzipPress reads of AutoTokenizer, over the model folder's tokenizer.model: transformers cannot load
    these folders' tokenizers without protobuf, and SentencePiece already encodes the prompts here. No chat
    template: KVzip's suffix is "\n", as kvpress takes it for such tokenizers."""
    chat_template = None

    def __init__(self, folder):
        self.sp = sentencepiece.SentencePieceProcessor(model_file=str(Path(folder) / "tokenizer.model"))

    @classmethod
    def from_pretrained(cls, folder, *args, **kwargs):
        return cls(folder)

    def encode(self, text, return_tensors=None, add_special_tokens=False):
        ids = self.sp.encode(text)
        return torch.tensor([ids]) if return_tensors == "pt" else ids


def run_kvpress(model_dir, method, ratio, ids, continuation=0):
    make_press = METHODS[method][0]
    press = make_press(ratio)
    # AdaKV and KVzip refuse eager attention, ChunkPress and BlockPress its attention weights; ObservedAttention
    # needs them.
    attn = "sdpa" if method in ("ada_snapkv", "criticalkv_ada_snapkv", "lukv_keydiff", "chunk_keydiff", "block_keydiff", "kvzip",
                                "kvzip_layerwise", "chunkkv_snapkv", "dms_keydiff", "dms_keydiff_decoding", "finch", "decoding_snapkv",
                                "finch_chunked") else "eager"
    model = load_model(model_dir, attn)
    L, KV = model.config.num_hidden_layers, model.config.num_key_value_heads
    kept, kept_values = {}, {}
    if method == "lukv_keydiff":
        press._budget_curves = lukv_curve(L, KV)  # set before the press would download one

    restore = lambda: None  # noqa: E731
    if method in DECODING_METHODS and len(compared_layers(model)) < L:
        compress_global_layers_only(press, set(compared_layers(model)))
    if method in CUT_DECODING_METHODS:
        track_cut_positions(press, kept, L, KV, len(ids))
        if method == "decoding_snapkv":
            restore = rotate_buffered_queries_at_their_positions(model)
    elif method.startswith("kvzip"):
        kvpress.presses.kvzip_press.AutoTokenizer = SentencePieceTokenizer
    elif method.startswith("dms"):
        pass  # a forward hook that masks: read after the prefill, as KVzip's
    elif method == "kvcompose":
        original = press.compress_cache

        def capture(m):
            for l in range(L):
                for h in range(KV):
                    mask = press.important_mask_per_kv_head[l][h]
                    kept[(l, h)] = sorted(int(i) for i in mask.nonzero().flatten())
            return original(m)

        press.compress_cache = capture
    else:
        original = press.compress

        def capture(module, hidden_states, keys, values, attentions, kwargs):
            out_keys, out_values = original(module, hidden_states, keys, values, attentions, kwargs)
            l = int(module.layer_idx)
            masked = getattr(module, "masked_key_indices", None)
            for h in range(KV):
                if method in CHANNEL_METHODS:  # pruned channels are zeroed in every entry
                    zero = (out_keys[0, h] == 0).all(0)
                    kept[(l, h)] = [c for c in range(zero.numel()) if not bool(zero[c])]
                elif method in ("ada_snapkv", "criticalkv_ada_snapkv", "lukv_keydiff"):
                    evicted = set(int(s) for hh, s in zip(masked[1].tolist(), masked[2].tolist()) if hh == h)
                    kept[(l, h)] = [i for i in range(keys.shape[2]) if i not in evicted]
                else:
                    kept[(l, h)] = rows_in(out_keys[0, h], keys[0, h])
                if method in VALUE_METHODS:
                    order = positions_of_rows(out_keys[0, h], keys[0, h])
                    rows = sorted(range(len(order)), key=lambda i: order[i])
                    kept_values[(l, h)] = out_values[0, h][rows].float().numpy()
            return out_keys, out_values

        press.compress = capture
    fed = ids
    if method.startswith("finch"):
        # A token the prompt does not hold serves as FINCH's delimiter; kvpress' hook drops its embedding, so the
        # model sees the prompt alone.
        press.delimiter_token_id = max(set(range(model.config.vocab_size)) - set(ids))
        fed = ids[:-FINCH_QUESTION] + [press.delimiter_token_id] + ids[-FINCH_QUESTION:]
    generated = []
    with torch.no_grad(), press(model):
        cache = DynamicCache()
        out = model(input_ids=torch.tensor([fed]), past_key_values=cache, use_cache=True)
        for step in range(continuation):  # greedy, as kvc-generate's default
            generated.append(int(out.logits[0, -1].argmax()))
            # Positions given, as kvpress' pipeline does: after a cut the cache is shorter than the tokens seen.
            out = model(input_ids=torch.tensor([[generated[-1]]]), past_key_values=cache, use_cache=True,
                        position_ids=torch.tensor([[len(fed) + step]]))
    restore()
    if method.startswith("kvzip") or method.startswith("dms"):
        # KVzip scores after the prefill, on leaving the context, DMS after each layer's prefill; both mask
        for l in range(L):
            masked = model.model.layers[l].self_attn.masked_key_indices
            if masked is None:  # nothing below the threshold
                masked = (torch.zeros(0), torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long))
            _, heads, seq = masked
            for h in range(KV):
                evicted = set(int(s) for hh, s in zip(heads.tolist(), seq.tolist()) if hh == h)
                kept[(l, h)] = [i for i in range(len(ids) + continuation) if i not in evicted]
    if method in CUT_DECODING_METHODS:
        kept = {key: sorted(pos) for key, pos in kept.items()}
    assert len(kept) == L * KV, f"{method}: kvpress compressed {len(kept)} of {L * KV} layer x head caches"
    layers = compared_layers(model)
    return layers, KV, {(l, h): pos for (l, h), pos in kept.items() if l in layers}, \
        {(l, h): v for (l, h), v in kept_values.items() if l in layers}, generated


def golden_path(out, model, method, ratio):
    return out / model / f"{method}_{ratio}.safetensors"


# Why kvc cannot keep exactly what kvpress keeps, where it cannot (stored in the golden file).
REASONS = {
    "kvcompose": "kvpress keeps int(L x S x (1 - ratio)) entries over all layers, computed in float64: at 0.9 "
                 "that truncates 99.99... to 99 of the 100 that kvc's budget x L keeps, so one more entry differs",
    "leverage": "kvpress estimates the leverage through a random Gaussian sketch drawn from torch's global RNG, "
                "with a Cholesky jitter of 0.01 in the sketched space; kvc computes the exact ridge leverage (ridge=0.01). "
                "With fewer prompt tokens than head dimensions (Gemma 3: 200 < 256) every exact leverage is 1 - 1/S, "
                "and the ranking is the ridge's (kvc) or the sketch's (kvpress)",
    "lagkv": "Gemma 3's global layers 5 and 17 hold key channels constant over a partition: kvpress divides by "
             "their zero range (NaN scores, any selection), kvc counts those channels as 0",
    "lagkv_cross": "Gemma 3's global layers 5 and 17 hold key channels constant over a partition: kvpress divides by "
                   "their zero range (NaN scores, any selection), kvc counts those channels as 0",
    "compactor": "the leverage half of the blend: kvpress sketches the keys with torch's global RNG, kvc computes the "
                 "exact ridge leverage (degenerate with fewer tokens than head dimensions, as Gemma 3's 256)",
    "criticalkv_snapkv": "at 0.9 kvpress' first stage keeps 9 entries, fewer than SnapKV's window of 16, and rescales "
                         "the other window entries by ||W_o v||; kvc keeps the window whole",
    "expected_attention": "kvpress computes the expected attention's softmax in float32, where a peaked head's "
                          "scores underflow to exactly 0 for most keys and torch.topk picks among those ties; kvc "
                          "computes it in float64 and ranks them",
    "knorm": "ties: a token repeated in the prompt has the same key before RoPE in the first layer, so the same "
             "norm; kvpress ranks such ties by the float32 rounding of the rotated keys, kvc by their order in top-k",
}


REASONS["merging_knorm"] = REASONS["knorm"]
REASONS["decoding_snapkv"] = ("kvpress patched so that each buffered query is rotated at its own position (it rotates "
                              "them all with the current token's); kernel 1, since kvpress keeps a cut's survivors in "
                              "score order and pools neighbours in that order")


def write_golden(path, ids, kept, layers, KV, method, ratio, mean_jaccard, values=None, model=None, continuation=()):
    import numpy as np
    tensors = {"prompt": np.asarray(ids, dtype=np.int32)}
    if continuation:
        tensors["continuation"] = np.asarray(continuation, dtype=np.int32)
    for (l, h), pos in kept.items():
        tensors[f"kept.{l}.{h}"] = np.asarray(pos, dtype=np.int32)
    for (l, h), v in (values or {}).items():
        tensors[f"values.{l}.{h}"] = np.ascontiguousarray(v, dtype=np.float32)
    spec, budget = kvc_spec(method, ratio, model), METHODS[method][2](ratio)
    meta = {"method": method, "ratio": str(ratio), "kvc_press": spec, "kvc_budget": " ".join(budget),
            "selects": "channels" if method in CHANNEL_METHODS else "positions",
            "kvpress_version": importlib.metadata.version("kvpress"),
            "layers": ",".join(str(l) for l in layers), "num_kv_heads": str(KV),
            "parity": "exact" if mean_jaccard == 1.0 else "approximate", "kvc_jaccard": f"{mean_jaccard:.6f}",
            "reason": REASONS.get(method, "near-ties between float32 scores (kvpress) and kvc's" if mean_jaccard < 1 else "")}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata=meta)


def run_kvc(build, model, spec, budget, ids_count, tmp, continuation=0):
    dump = Path(tmp) / "kept.safetensors"
    prompt = Path(tmp) / "prompt.txt"
    prompt.write_text(prompt_text(model))
    # With a continuation, its greedy tokens are fed after the prompt (the last one generated is not).
    cmd = [str(build / "bin/kvc-generate"), "-m", model_path(model), "-f", str(prompt), "--prompt-tokens",
           str(ids_count), "-n", str(continuation + 1), "--ignore-eos", "-q", "--json", "--press", spec, *budget,
           "--dump-kept", str(dump)]
    if model in GGUF_MODELS:
        cmd += ["--dtype", "float32"]  # the blocks dequantized as transformers does (and the test loads them)
    out = subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, text=True).stdout
    return load_file(str(dump)), json.loads(out)["generated_ids"][:continuation]


def jaccard(a, b):
    a, b = set(int(x) for x in a), set(int(x) for x in b)
    return len(a & b) / len(a | b) if a | b else 1.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="kvc build folder with bin/kvc-generate")
    ap.add_argument("--out", default="data/parity", help="golden files folder")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    out, build = ROOT / args.out, (ROOT / args.build).resolve()
    torch.manual_seed(0)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    rows = []
    models = args.models.split(",")
    for model in models:
        model_dir = model_path(model)
        ids = prompt_ids(model, build)
        for method in args.methods.split(","):
            if model in GGUF_MODELS and method in NOT_ON_GGUF_MODELS:
                continue
            for ratio in METHOD_RATIOS.get(method, RATIOS):
                steps = CONTINUATION if method in DECODING_METHODS else 0
                layers, KV, kept, values, fed = run_kvpress(model_dir, method, ratio, ids, steps)
                if method == "lukv_keydiff":
                    write_lukv_curve(model, len(layers), KV)
                with tempfile.TemporaryDirectory() as tmp:
                    dump, kvc_fed = run_kvc(build, model, kvc_spec(method, ratio, model), METHODS[method][2](ratio),
                                            len(ids), tmp, steps)
                assert kvc_fed == fed, f"{method} {model} {ratio}: kvc generated {kvc_fed}, kvpress {fed}"
                what = "channels" if method in CHANNEL_METHODS else "final" if fed else "kept"
                scores = [jaccard(dump[f"{what}.{l}.{h}"], kept[(l, h)]) for l in layers for h in range(KV)]
                write_golden(golden_path(out, model, method, ratio), ids, kept, layers, KV, method, ratio,
                             sum(scores) / len(scores), values, model, fed)
                rows.append((method, model, ratio, sum(scores) / len(scores), min(scores)))
                print(f"{method:20s} {model:12s} {ratio:<5} mean Jaccard {rows[-1][3]:.4f} (min {rows[-1][4]:.4f})",
                      file=sys.stderr)
    if rows:
        print("| method | kvc parameters | model | J@0.25 | J@0.5 | J@0.75 | J@0.9 |")
        print("|---|---|---|---|---|---|---|")
        for method in args.methods.split(","):
            for model in models:
                found = {r[2]: r[3] for r in rows if r[0] == method and r[1] == model}
                if not found:
                    continue
                cells = [f"{found[ratio]:.3f}" if ratio in found else "—" for ratio in RATIOS]
                print(f"| {method} | `{kvc_spec(method, 'R')}` | {model} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
