"""h5py (Debian python3-h5py) reads an mpiaccel checkpoint as it is: root
attributes, every tensor's values (bf16 through HDF5's own conversion of the
committed float type), /meta/shards and its index (format version 2),
/meta/config, /trainer, /rng.

usage: check_h5py.py FILE STEP"""
import sys

import h5py
import numpy as np

from ckpt_values import expected


def text(value):
    return value.decode() if isinstance(value, (bytes, np.bytes_)) else str(value)


def main(path, step):
    with h5py.File(path, "r") as f:
        assert text(f.attrs["format"]) == "mpiaccel.checkpoint", dict(f.attrs)
        assert int(f.attrs["format_version"]) == 2
        assert int(f.attrs["step"]) == step
        world = int(f.attrs["world_size"])
        assert text(f.attrs["strategy"]) == "ddp"
        w_rows = f["model/w"].shape[0]
        for name, (want, dtype) in expected(step, w_rows).items():
            ds = f[name]
            assert text(ds.attrs["torch_dtype"]) == dtype, (name, ds.attrs["torch_dtype"])
            got = ds.astype("f4")[()] if dtype == "bfloat16" else ds[()]
            assert got.shape == want.shape, (name, got.shape, want.shape)
            assert np.array_equal(got, want), (name, got.ravel()[:8], want.ravel()[:8])
        bf16 = f["types/bfloat16"]
        # h5py maps the 16-bit layout to float32 for numpy; HDF5 itself stores 2 bytes.
        assert isinstance(bf16, h5py.Datatype) and bf16.id.get_size() == 2 and bf16.dtype.kind == "f"
        shards = f["meta/shards"][()]
        assert set(shards.dtype.names) == {"name", "rank", "first_row", "rows", "crc32c"}
        rows = {}
        for rec in shards:
            rows.setdefault(text(rec["name"]), []).append((int(rec["first_row"]), int(rec["rows"])))
        for name, parts in rows.items():
            parts.sort()
            end = 0
            for first, count in parts:
                assert first == end, (name, parts)
                end += count
        assert rows["model/w"][-1][0] + rows["model/w"][-1][1] == w_rows
        # Version 2: [tensors, 2] of each tensor's first row in the table and its count.
        index = f["meta/shard_index"][()]
        assert index.shape == (len(rows), 2), index.shape
        for first, count in index:
            names = {text(n) for n in shards["name"][first:first + count]}
            assert len(names) == 1 and len(rows[names.pop()]) == count, (first, count)
        assert "[train]" in text(f["meta/config"][()])
        assert text(f["trainer"].attrs["samples_seen"]) == str(step * 64)
        for r in range(world):
            assert bytes(f["rng/%d" % r][()]) == ("rng-of-rank-%d" % r).encode()
    print("h5py: %s step %d: %d tensors match" % (path, step, len(expected(step, w_rows))))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
