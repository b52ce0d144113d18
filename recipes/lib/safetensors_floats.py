"""Float tensors of a safetensors file as tuples, with the standard library only (the recipes need no numpy)."""
import json
import struct

FORMATS = {"F32": ("f", 4), "F64": ("d", 8)}


def float_tensors(path, dtype):
    """{name: values} of every tensor of `dtype` ("F32" or "F64") in the file at `path`."""
    code, size = FORMATS[dtype]
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != dtype:
            continue
        a, b = info["data_offsets"]
        out[name] = struct.unpack(f"<{(b - a) // size}{code}", data[a:b])
    return out
