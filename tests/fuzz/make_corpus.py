#!/usr/bin/env python3
"""Writes the fuzz seed corpora (tests/fuzz/corpus/<target>/): small valid inputs for each reader.

Usage: tests/fuzz/make_corpus.py [build-fuzz]   (the build folder supplies fuzz_store_pages for its seed)
Copies of tiny committed files where they exist, hand-built files where they do not (GGUF, the index).
"""
import json
import os
import shutil
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def put(target, name, data):
    folder = os.path.join(OUT, target)
    os.makedirs(folder, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(folder, name), mode) as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    """tensors: name -> (dtype, shape, raw bytes); laid out in name order."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def content_checksum(data):
    """kvc.checksum (lib/io/content_checksum.h), written out independently: 64-bit words round-robin over
    four FNV-1a lanes, the tail zero-padded, then the lanes and the byte count folded."""
    mask, prime = (1 << 64) - 1, 0x100000001b3
    lanes = [0xcbf29ce484222325, 0x84222325cbf29ce4, 0x9ce484222325cbf2, 0x2325cbf29ce48422]
    padded = data + b"\0" * (-len(data) % 32)
    for i, (word,) in enumerate(struct.iter_unpack("<Q", padded)):
        lanes[i % 4] = ((lanes[i % 4] ^ word) * prime) & mask
    h = 0xcbf29ce484222325
    for v in lanes + [len(data)]:
        h = ((h ^ v) * prime) & mask
    h ^= h >> 29
    return "w4fnv64:%016x" % h


def sealed_safetensors(tensors, metadata=None):
    """A safetensors file as kvc writes it: kvc.checksum over the header's compact, key-sorted JSON
    without that entry, then the data."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = dict(metadata)
    dump = lambda h: json.dumps(h, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
    checksum = content_checksum(dump(header) + b"".join(blobs))
    header.setdefault("__metadata__", {})["kvc.checksum"] = checksum
    text = dump(header)
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & ((1 << 64) - 1)
    return h


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def i64(values):
    return struct.pack("<%dq" % len(values), *values)


# GGUF v3 writer: enough of the format for metadata, string/int arrays and F32 tensors.
def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf(kv, tensors, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, (kind, value) in kv.items():
        out += gguf_string(key)
        if kind == "str":
            out += struct.pack("<I", 8) + gguf_string(value)
        elif kind == "u32":
            out += struct.pack("<II", 4, value)
        elif kind == "f32":
            out += struct.pack("<If", 6, value)
        elif kind == "bool":
            out += struct.pack("<IB", 7, value)
        elif kind == "strs":
            out += struct.pack("<IIQ", 9, 8, len(value)) + b"".join(gguf_string(v) for v in value)
        elif kind == "i32s":
            out += struct.pack("<IIQ", 9, 5, len(value)) + struct.pack("<%di" % len(value), *value)
    offset, blobs = 0, []
    for name, shape, raw in tensors:
        out += gguf_string(name) + struct.pack("<I", len(shape)) + struct.pack("<%dQ" % len(shape), *shape)
        out += struct.pack("<IQ", 0, offset)  # type 0: F32
        pad = -len(raw) % alignment
        blobs.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    out += b"\0" * (-len(out) % alignment)
    return out + b"".join(blobs)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build-fuzz")
    shutil.rmtree(OUT, ignore_errors=True)

    # safetensors: two tiny committed artifacts and a hand-built file with every dtype family.
    parity = os.path.join(ROOT, "data", "parity", "kvc-tiny-lm")
    for name in ("tova_0.9.safetensors", "streaming_llm_0.9.safetensors"):
        put("safetensors", name, open(os.path.join(parity, name), "rb").read())
    put("safetensors", "mixed.safetensors", safetensors({
        "a": ("F32", [2, 2], f32([1, 2, 3, 4])),
        "b": ("BF16", [3], b"\x80\x3f" * 3),
        "c": ("I64", [1], i64([7])),
        "d": ("F16", [0], b""),
    }, {"format": "pt", "kind": "bases"}))

    # config.json: the committed models' configs and a local/global (Gemma 3) variant.
    for model in ("stories260K", "kvc-micro-lm"):
        put("model_config", model + ".json", open(os.path.join(ROOT, "data", "models", model, "config.json")).read())
    gemma = {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6,
             "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256,
             "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
             "rope_local_base_freq": 10000.0, "sliding_window": 32, "sliding_window_pattern": 6,
             "query_pre_attn_scalar": 16, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
             "bos_token_id": 2, "eos_token_id": [1, 106]}
    put("model_config", "gemma3.json", json.dumps(gemma, indent=1))

    # GGUF: llama metadata, a byte-level BPE vocabulary, two F32 tensors.
    tokens = ["a", "b", "c", " ", "ab", "abc", "<|endoftext|>"]
    kv = {
        "general.architecture": ("str", "llama"),
        "llama.block_count": ("u32", 1),
        "llama.context_length": ("u32", 64),
        "llama.embedding_length": ("u32", 8),
        "llama.feed_forward_length": ("u32", 16),
        "llama.attention.head_count": ("u32", 2),
        "llama.attention.head_count_kv": ("u32", 1),
        "llama.attention.layer_norm_rms_epsilon": ("f32", 1e-5),
        "llama.rope.freq_base": ("f32", 10000.0),
        "tokenizer.ggml.model": ("str", "gpt2"),
        "tokenizer.ggml.pre": ("str", "gpt2"),
        "tokenizer.ggml.tokens": ("strs", tokens),
        "tokenizer.ggml.token_type": ("i32s", [1, 1, 1, 1, 1, 1, 3]),
        "tokenizer.ggml.merges": ("strs", ["a b", "ab c"]),
        "tokenizer.ggml.bos_token_id": ("u32", 6),
        "tokenizer.ggml.eos_token_id": ("u32", 6),
        "tokenizer.ggml.add_bos_token": ("bool", 0),
    }
    tensors = [("token_embd.weight", [8, 7], f32([0.5] * 56)), ("output_norm.weight", [8], f32([1.0] * 8))]
    put("gguf_tokenizer", "gpt2.gguf", gguf(kv, tensors))
    # The GGUF config reader knows Gemma 3 only: the same file under that architecture's keys.
    gemma_kv = {k.replace("llama.", "gemma3."): v for k, v in kv.items()}
    gemma_kv.update({"general.architecture": ("str", "gemma3"), "gemma3.attention.key_length": ("u32", 4),
                     "gemma3.attention.value_length": ("u32", 4), "gemma3.attention.sliding_window": ("u32", 16),
                     "gemma3.rope.scaling.type": ("str", "linear"), "gemma3.rope.scaling.factor": ("f32", 8.0)})
    put("gguf", "gemma3.gguf", gguf(gemma_kv, tensors))
    kv["tokenizer.ggml.pre"] = ("str", "llama-bpe")
    put("gguf_tokenizer", "llama-bpe.gguf", gguf(kv, []))

    # tokenizer.json: the committed gpt2-style file with its vocabulary and merges trimmed.
    tok = json.load(open(os.path.join(ROOT, "data", "tokenizers", "gpt2-style", "tokenizer.json")))
    vocab = tok["model"]["vocab"]
    keep = dict(sorted(vocab.items(), key=lambda kv: kv[1])[:300])
    tok["model"]["vocab"] = keep
    merges = []
    for m in tok["model"]["merges"]:
        pair = m.split(" ") if isinstance(m, str) else m
        if len(pair) == 2 and pair[0] in keep and pair[1] in keep and "".join(pair) in keep:
            merges.append(m)
    tok["model"]["merges"] = merges
    tok["added_tokens"] = [t for t in tok.get("added_tokens", []) if t["id"] < 300]
    put("tokenizer_json", "gpt2-style.json", json.dumps(tok, ensure_ascii=False))

    # A file as kvc writes it, sealed by kvc.checksum (tests/base/test_safetensors.cpp opens this one:
    # the checksum computed here, independently, must verify there).
    put("safetensors", "sealed.safetensors", sealed_safetensors({
        "layers.0.k.U": ("F32", [2, 3], f32([0.5, -1.0, 2.0, 0.25, 3.0, -4.5])),
        "layers.0.k.eigenvalues": ("F32", [3], f32([3.0, 2.0, 1.0])),
        "steps": ("I64", [1], i64([7])),
    }, {"format": "kvc-bases", "model": "m", "tau": "0.5"}))

    # kvc-train checkpoint: an archive's stand-in sealed by the trailer (magic, length, FNV-1a 64).
    archive = b"PK\x03\x04" + bytes(range(60))
    put("checkpoint", "sealed.ckpt", archive + b"KVCCKPT1" + struct.pack("<QQ", len(archive), fnv1a64(archive)))

    # tokenizer.model: the tiny story model's SentencePiece file (7.5 KB; the nmt_nfkc fixture's
    # 240 KB character map is past libFuzzer's input sizes).
    put("sentencepiece_model", "stories260K.model",
        open(os.path.join(ROOT, "data", "models", "stories260K", "tokenizer.model"), "rb").read())

    # Cluster index: 2 clusters, one layer of 2 KV heads, head_dim 8.
    index = safetensors({
        "centroids": ("F32", [2, 8], f32([0.25] * 16)),
        "variances": ("F32", [2], f32([1.0, 2.0])),
        "clusters": ("I64", [2, 4], i64([0, 0, 0, 3, 1, 0, 1, 2])),
        "entry_cluster": ("I64", [5, 4], i64([0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 1, 0, 1, 0, 1, 1, 1])),
        "extents": ("I64", [2, 6], i64([0, -1, 0, 1, 3, 12345, 1, -1, 0, 2, 2, 678])),
        "thresholds": ("F32", [1, 2], f32([0.5, 0.75])),
    }, {"format": "kvc-cluster-index", "store": "s.kvs", "generation": "42", "head_dim": "8",
        "page_bytes": "4096", "file_pages": "3", "strategy": "adaptive", "model": "m"})
    put("cluster_index", "index.safetensors", index)

    # Chat templates: the built-ins and the real models' templates the goldens use.
    templates = os.path.join(ROOT, "data", "chat_templates")
    for folder in (templates, os.path.join(templates, "models")):
        for name in sorted(os.listdir(folder)):
            if name.endswith(".jinja"):
                put("chat_template", name, open(os.path.join(folder, name), "rb").read())

    # Store pages: the store fuzz_store_pages checks against, written by the target itself.
    folder = os.path.join(OUT, "store_pages")
    os.makedirs(folder, exist_ok=True)
    env = dict(os.environ, KVC_FUZZ_WRITE_SEED=os.path.join(folder, "store.kvs"))
    subprocess.run([os.path.join(build, "bin", "fuzz_store_pages")], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
