#!/usr/bin/env python3
"""Writes data/gguf/quantize/rows.f32 (float32 values, little-endian) and <TYPE>.blocks (the Q8_0 / Q4_0
blocks gguf.quants, a port of llama.cpp's reference quantizers, encodes them into).

Run with a Python that has `gguf` and `numpy`:  python3 scripts/make_gguf_quantize_goldens.py
tests/base/test_gguf_quantize.cpp encodes the same rows with kvc and compares byte for byte."""
import pathlib
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

OUT = pathlib.Path(__file__).resolve().parent.parent / "data" / "gguf" / "quantize"


def rows(rng):
    """Blocks of 32 values that exercise every branch: typical activations, wide and tiny magnitudes
    (subnormal half scales), all zeros, a single nonzero, exact rounding ties, the largest magnitude
    negative or positive (Q4_0 keeps its sign), repeated maxima, and scales past the half range
    (stored as infinity, as ggml stores them)."""
    blocks = [rng.standard_normal((64, 32)) * s for s in (1.0, 0.05, 30.0)]
    blocks.append(rng.standard_normal((8, 32)) * 1e-6)          # scales below half's normal range
    blocks.append(np.zeros((1, 32)))
    one = np.zeros((1, 32)); one[0, 7] = -3.0; blocks.append(one)
    ties = np.arange(32, dtype=np.float64).reshape(1, 32) - 15.5  # halves of the scale
    blocks.append(ties * (127 / 16.5)); blocks.append(ties / 2)
    for sign in (1.0, -1.0):
        b = rng.uniform(-1, 1, (4, 32)); b[:, 3] = sign * 2.0; blocks.append(b)
    rep = rng.uniform(-1, 1, (2, 32)); rep[:, [1, 9]] = [[2.0, -2.0], [-2.0, 2.0]]; blocks.append(rep)
    blocks.append(rng.standard_normal((4, 32)) * 4e6)             # scales past the largest half
    return np.concatenate(blocks).astype(np.float32).reshape(-1)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    x = rows(np.random.default_rng(29))
    (OUT / "rows.f32").write_bytes(x.astype("<f4").tobytes())
    for qtype in (T.Q8_0, T.Q4_0):
        with np.errstate(over="ignore"):  # the scales past the half range
            blocks = quantize(x.reshape(-1, 32), qtype).reshape(-1)
        (OUT / f"{qtype.name}.blocks").write_bytes(blocks.tobytes())
        print(f"{qtype.name}: {x.size} values -> {blocks.size} bytes")


if __name__ == "__main__":
    main()
