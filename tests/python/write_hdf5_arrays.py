#!/usr/bin/python3
"""Writes HDF5 files with h5py for the tests of [train] dataset = hdf5.

  write_hdf5_arrays.py fixture OUT.h5      small arrays of every kind the reader
                                           must take or refuse, and a 40 GB
                                           (logical) dataset that only a
                                           hyperslab reader can use
  write_hdf5_arrays.py fashion OUT.h5 N [LAYOUT]
                                           the first N Fashion-MNIST training
                                           images (repeated past 60,000) (normalised float32
                                           [N, 1, 28, 28]) and labels (int64);
                                           LAYOUT chunked (64 images a chunk,
                                           the default) or contiguous (h5py's
                                           default)
"""
import gzip
import sys

import h5py
import numpy as np


def fixture(path):
    with h5py.File(path, "w") as f:
        rows = np.arange(10, dtype=np.float64)[:, None, None]
        # float64 on disk: the reader converts to float32. Value = row*100 + k.
        f["inputs"] = rows * 100 + np.arange(6, dtype=np.float64).reshape(1, 2, 3)
        f["labels"] = np.arange(10, dtype=np.int32) * 3  # int32 on disk, int64 read
        # The same values in layouts the direct (pread) reader leaves to
        # HDF5: chunked, big-endian, unsigned 16-bit.
        f.create_dataset("inputs_chunked", data=f["inputs"][()], chunks=(3, 2, 3))
        f["inputs_big_endian"] = f["inputs"][()].astype(">f8")
        f.create_dataset("labels_chunked", data=f["labels"][()], chunks=(4,))
        f["labels_uint16"] = f["labels"][()].astype(np.uint16)
        g = f.create_group("group")
        g["pixels"] = np.arange(40, dtype=np.uint8).reshape(10, 4)  # uint8 -> float32
        f["names"] = np.array([b"a"] * 10, dtype="S1")  # not numeric
        f["float_labels"] = np.zeros(10, dtype=np.float32)
        f["short_labels"] = np.zeros(9, dtype=np.int64)
        f["scalar"] = np.float32(1)
        # 10^7 rows of 1000 floats = 40 GB if read whole; chunks never written
        # are not stored, so the file stays small and only a reader that
        # selects rows can use it.
        huge = f.create_dataset("huge", shape=(10_000_000, 1000), dtype=np.float32,
                                chunks=(1, 1000))
        huge[5] = np.full(1000, 5.0, dtype=np.float32)
        huge[9_999_999] = np.arange(1000, dtype=np.float32)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(magic & 0xFF)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def fashion(path, n, layout="chunked"):
    root = "/usr/share/datasets/fashion-mnist/"
    images = read_idx(root + "train-images-idx3-ubyte.gz")
    labels = read_idx(root + "train-labels-idx1-ubyte.gz")
    x = ((images.astype(np.float32) / 255 - 0.2860) / 0.3530).reshape(-1, 1, 28, 28)
    y = labels.astype(np.int64)
    with h5py.File(path, "w") as f:
        # Past the 60,000 images the set repeats (a larger-than-cache file
        # for bench/loader), written a copy at a time.
        inputs = f.create_dataset("inputs", shape=(n, 1, 28, 28), dtype=np.float32,
                                  chunks=(64, 1, 28, 28) if layout == "chunked" else None)
        targets = f.create_dataset("labels", shape=(n,), dtype=np.int64)
        for start in range(0, n, len(x)):
            count = min(len(x), n - start)
            inputs[start:start + count] = x[:count]
            targets[start:start + count] = y[:count]


if __name__ == "__main__":
    if sys.argv[1] == "fixture":
        fixture(sys.argv[2])
    elif sys.argv[1] == "fashion":
        fashion(sys.argv[2], int(sys.argv[3]), *sys.argv[4:5])
    else:
        sys.exit("usage: write_hdf5_arrays.py fixture OUT | fashion OUT N [chunked|contiguous]")
