#!/usr/bin/env python3
"""Writes data/gguf/blocks/<arch>-blocks.gguf: the random-weight Llama and Qwen2 GGUF files of
data/reference/gguf-architectures/ with their matrices quantized by gguf.quants (llama.cpp's reference
quantizers) into several block formats at once: within a layer q, k and v each get their own format
(as a Q4_K_M file mixes them), the MLP others, the embedding Q8_0. ffn_down (48 columns, not a whole
number of 32-value blocks) becomes F16. Metadata is copied as it is.

Run with a Python that has `gguf` and `numpy`:  python3 scripts/make_gguf_block_models.py
tests/core/test_gguf_blocks.cpp loads them with the weights in their blocks and dequantized."""
import pathlib
import numpy as np
from gguf import GGUFReader, GGUFWriter, GGUFValueType, GGMLQuantizationType as T
from gguf.quants import quantize

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "data" / "reference" / "gguf-architectures"
OUT = ROOT / "data" / "gguf" / "blocks"
FORMATS = {"token_embd": T.Q8_0, "output": T.Q8_0, "attn_q": T.Q4_0, "attn_k": T.Q5_1, "attn_v": T.Q8_0,
           "attn_output": T.Q4_1, "ffn_gate": T.Q5_0, "ffn_up": T.Q4_0, "ffn_down": T.F16}


def copy_metadata(reader, writer):
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        if vtype == GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == GGUFValueType.STRING:
                writer.add_array(name, [bytes(field.parts[i]).decode("utf-8") for i in field.data])
            else:
                writer.add_array(name, [field.parts[i].tolist()[0] for i in field.data])
        elif vtype == GGUFValueType.STRING:
            writer.add_string(name, bytes(field.parts[field.data[0]]).decode("utf-8"))
        else:
            writer.add_key_value(name, field.parts[field.data[0]].tolist()[0], vtype)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for arch in ["llama", "qwen2"]:
        reader = GGUFReader(SRC / f"{arch}.gguf")
        name = bytes(reader.fields["general.architecture"].parts[-1]).decode()
        path = OUT / f"{arch}-blocks.gguf"
        writer = GGUFWriter(str(path), name)
        copy_metadata(reader, writer)
        for t in reader.tensors:
            assert t.tensor_type == T.F32, t.name
            values = np.asarray(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
            kind = t.name.split(".")[-2] if t.name.startswith("blk.") else t.name.split(".")[0]
            qtype = FORMATS.get(kind) if values.ndim == 2 else None
            if qtype is None:
                writer.add_tensor(t.name, values)
            elif qtype == T.F16:
                writer.add_tensor(t.name, values.astype(np.float16))
            else:
                writer.add_tensor(t.name, quantize(values, qtype), raw_dtype=qtype)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
