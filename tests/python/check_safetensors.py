"""Parses a safetensors file written by `mpiaccel ckpt export` from the
format's definition (8-byte little-endian header length, JSON header, raw
little-endian bytes) and checks every tensor against the formula; then, if
Debian's python3-torch is there, reads the same bytes through torch too.

usage: check_safetensors.py FILE STEP"""
import json
import struct
import sys

import numpy as np

from ckpt_values import bf16_bits, expected, values_f32

NUMPY = {"F32": np.float32, "I64": np.int64, "BF16": np.uint16}


def main(path, step):
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    data = blob[8 + length:]
    meta = header.pop("__metadata__")
    assert meta["step"] == str(step), meta
    end = 0
    for name, entry in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, stop = entry["data_offsets"]
        assert begin == end, ("hole or overlap before", name)
        end = stop
    assert end == len(data), (end, len(data))
    w_rows = header["model/w"]["shape"][0]
    for name, (want, dtype) in expected(step, w_rows).items():
        entry = header[name]
        begin, stop = entry["data_offsets"]
        raw = np.frombuffer(data[begin:stop], dtype=NUMPY[entry["dtype"]]).reshape(entry["shape"])
        if dtype == "bfloat16":
            assert entry["dtype"] == "BF16"
            assert np.array_equal(raw, bf16_bits(values_f32(step, want.size))), name
        else:
            assert np.array_equal(raw, want), (name, raw.ravel()[:8], want.ravel()[:8])
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        entry = header["model/b"]
        begin, stop = entry["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:stop]), dtype=torch.bfloat16)
        want = torch.from_numpy(values_f32(step, t.numel())).to(torch.bfloat16)
        assert torch.equal(t, want), "bf16 via torch"
    print("safetensors: %s step %d: %d tensors match%s" %
          (path, step, len(header), " (and via torch)" if torch is not None else ""))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
