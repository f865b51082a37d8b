"""The loader benchmark's peer: PyTorch's DataLoader over the same HDF5 file.

An h5py Dataset with __getitems__ (torch >= 2.2 fetches a batch's indices in
one call): each batch's rows are read at once, in file order, as a careful
user writes it; each worker process opens the file on its first read (h5py
handles do not survive a fork). The model and optimizer match bench/loader's
`mpiaccel train` run: the MLP 784-256-256-10 with GELU, AdamW lr 2e-3, batch
64, shuffled. Prints one CSV row: torch,WORKERS,LABEL,STEPS_PER_S, measured
from step WARMUP to STEPS.
"""
import argparse
import time

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler


class Hdf5Rows(Dataset):
    def __init__(self, path):
        self.path = path
        self.file = None
        with h5py.File(path, "r") as f:
            self.n = f["inputs"].shape[0]

    def __len__(self):
        return self.n

    def __getitems__(self, indices):
        if self.file is None:
            self.file = h5py.File(self.path, "r")
        rows = np.unique(np.asarray(indices))
        where = np.searchsorted(rows, indices)
        x = torch.from_numpy(self.file["inputs"][rows])[where]
        y = torch.from_numpy(self.file["labels"][rows])[where]
        return x, y


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--label", default="")
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(42)
    data = Hdf5Rows(a.data)
    loader = DataLoader(data, batch_size=64, sampler=RandomSampler(data, generator=torch.Generator().manual_seed(42)),
                        num_workers=a.workers, collate_fn=lambda batch: batch, drop_last=True,
                        persistent_workers=a.workers > 0, prefetch_factor=2 if a.workers > 0 else None)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.GELU(),
                                torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    step, start = 0, None
    while step < a.steps:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            step += 1
            if step == a.warmup:
                start = time.perf_counter()
            if step == a.steps:
                break
    rate = (a.steps - a.warmup) / (time.perf_counter() - start)
    print(f"torch,{a.workers},{a.label},{rate:.2f}")


if __name__ == "__main__":
    main()
