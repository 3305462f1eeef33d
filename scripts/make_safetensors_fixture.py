#!/usr/bin/python3
"""Write tests/fixtures/torch_written.safetensors, read by tests/test_io.cpp.

Run with Debian's PyTorch (python3-torch); the `safetensors` package is not needed:
    /usr/bin/python3 scripts/make_safetensors_fixture.py [--out FILE]
    /usr/bin/python3 scripts/make_safetensors_fixture.py --check FILE   (print a file's tensors)

The file is written by hand, byte for byte as the safetensors format says:
  - 8 bytes: N, the header length, little-endian u64;
  - N bytes: a UTF-8 JSON object {"__metadata__": {str: str}, name: {"dtype", "shape",
    "data_offsets": [begin, end]}, ...}, padded with spaces so that N % 8 == 0;
  - the data: each tensor's bytes as PyTorch holds them (row-major, little-endian), at
    [begin, end) from the first byte after the header, tensors back to back.
Header keys are sorted (as json.dumps(sort_keys=True) does) while the data is laid out in
another order, so a reader that assumes header order == data order fails.

The values are simple formulas that tests/test_io.cpp recomputes in C++ (the same IEEE
operations give the same bits), plus special floats. Output is deterministic.

--check parses a file with this script's own reader, checks the layout rules (sizes,
offsets contiguous from 0, header padding) and prints every tensor through torch, to
cross-check files that depthlab wrote.
"""
import argparse
import json
import math
import os
import struct
import sys

import torch

# (name, dtype, shape, values) in data order. The C++ test has the same formulas.
def tensors():
    return [
        # F32 (2, 3): float32((i - 2) * 0.1)
        ("f32.matrix", torch.float32, (2, 3), [(i - 2) * 0.1 for i in range(6)]),
        # F64 (2, 2, 2): (i - 3) / 7
        ("f64.cube", torch.float64, (2, 2, 2), [(i - 3) / 7 for i in range(8)]),
        # I64 (5,): values that do not fit 32 bits, both extremes
        ("i64.ids", torch.int64, (5,), [0, -1, 2**40 + 7, -(2**63), 2**63 - 1]),
        # F32 (7,): signed zero, infinities, NaN, the smallest subnormal, the largest finite
        ("f32.special", torch.float32, (7,),
         [0.0, -0.0, math.inf, -math.inf, math.nan, 2.0**-149, 3.4028234663852886e38]),
        # F64 scalar (shape [])
        ("f64.scalar", torch.float64, (), [math.pi]),
        # F32 (0, 3): no data, data_offsets [x, x]
        ("f32.empty", torch.float32, (0, 3), []),
    ]


DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}
SIZES = {"F32": 4, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1, "F16": 2, "BF16": 2,
         "U16": 2, "U32": 4, "U64": 8}
TORCH_OF = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32, "I16": torch.int16,
            "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool, "F16": torch.float16, "BF16": torch.bfloat16}

METADATA = {"format": "pt", "producer": "scripts/make_safetensors_fixture.py", "unicode": "π ≈ 3.14159 ✓"}


def build():
    assert sys.byteorder == "little"
    header = {"__metadata__": METADATA}
    data = b""
    for name, dtype, shape, values in tensors():
        t = torch.tensor(values, dtype=dtype).reshape(shape).contiguous()
        raw = t.numpy().tobytes()  # the tensor's own memory
        assert len(raw) == t.numel() * t.element_size()
        header[name] = {"dtype": DTYPES[dtype], "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def check(path):
    blob = open(path, "rb").read()
    assert len(blob) >= 8, "shorter than 8 bytes"
    (n,) = struct.unpack("<Q", blob[:8])
    assert 8 + n <= len(blob), "header length %d past the end" % n
    print("%s: %d bytes, header %d bytes (%s8-byte aligned)" % (path, len(blob), n, "" if n % 8 == 0 else "NOT "))
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    print("metadata:", json.dumps(meta, ensure_ascii=False, sort_keys=True))
    pos = 0
    for name, e in sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        b, end = e["data_offsets"]
        assert b == pos, "%s: begins at %d, expected %d" % (name, b, pos)
        assert end - b == math.prod(e["shape"]) * SIZES[e["dtype"]], "%s: wrong size" % name
        pos = end
        raw = bytearray(data[b:end])
        t = (torch.frombuffer(raw, dtype=TORCH_OF[e["dtype"]]) if raw else torch.empty(0, dtype=TORCH_OF[e["dtype"]]))
        t = t.reshape(e["shape"])
        print("%s %s %s [%d, %d): %s" % (name, e["dtype"], list(e["shape"]), b, end, t.flatten().tolist()))
    assert pos == len(data), "data section has %d bytes, tensors cover %d" % (len(data), pos)
    print("OK: offsets contiguous from 0 and cover the data section")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "torch_written.safetensors"))
    ap.add_argument("--check", metavar="FILE", help="print and check FILE instead of writing the fixture")
    args = ap.parse_args()
    if args.check:
        check(args.check)
        return
    blob = build()
    with open(args.out, "wb") as f:
        f.write(blob)
    print("wrote %s (%d bytes, torch %s)" % (os.path.normpath(args.out), len(blob), torch.__version__))


if __name__ == "__main__":
    main()
