#!/usr/bin/env python3
"""Writes data/gguf/dequant/<TYPE>.blocks (random ggml blocks) and <TYPE>.f32 (their values as
gguf.quants, llama.cpp's reference dequantizers, decode them, little-endian float32).

Run with a Python that has `gguf` and `numpy`:  python3 scripts/make_gguf_dequant_goldens.py
tests/base/test_gguf_dequant.cpp decodes the same blocks with kvc and compares."""
import pathlib
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize
from gguf.constants import GGML_QUANT_SIZES

OUT = pathlib.Path(__file__).resolve().parent.parent / "data" / "gguf" / "dequant"
BLOCKS = 8
# Byte offsets of each block's half-precision scales: random bytes there could be NaN or infinity,
# so they get finite values of a realistic magnitude.
HALF_FIELDS = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
               T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}


def random_blocks(rng, qtype):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n = BLOCKS * max(block_elems, 256)
    if qtype == T.F32:
        return rng.standard_normal(n).astype("<f4").view(np.uint8)
    if qtype == T.F16:
        return (rng.standard_normal(n) * 4).astype("<f2").view(np.uint8)
    if qtype == T.BF16:
        bits = (rng.standard_normal(n) * 4).astype("<f4").view(np.uint32) >> 16
        return bits.astype("<u2").view(np.uint8)
    nblocks = n // block_elems
    raw = rng.integers(0, 256, size=(nblocks, block_bytes), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        raw[:, off:off + 2] = (rng.uniform(-0.05, 0.05, nblocks)).astype("<f2").view(np.uint8).reshape(nblocks, 2)
    return raw.reshape(-1)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(13)
    for qtype in [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K]:
        raw = random_blocks(rng, qtype)
        values = dequantize(raw, qtype).astype("<f4").reshape(-1)
        (OUT / f"{qtype.name}.blocks").write_bytes(raw.tobytes())
        (OUT / f"{qtype.name}.f32").write_bytes(values.tobytes())
        print(f"{qtype.name}: {raw.size} bytes -> {values.size} values")


if __name__ == "__main__":
    main()
