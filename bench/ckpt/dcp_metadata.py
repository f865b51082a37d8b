"""The peer side of bench_ckpt_metadata: PyTorch DCP's save and load of the
same state (2,000 float32 [64, 16] tensors, each a DTensor sharded on dim 0
over the ranks, gloo on the CPU), at the same world size, in the same run.
Rank and world size come from Open MPI's environment.

    dcp_metadata.py DIR [--tensors T] [--reps R]

Prints: dcp np=N tensors=T save_s=... load_s=... (medians, slowest rank).
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

from gloo_under_mpirun import init_gloo  # this directory


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--tensors", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    rank, world = init_gloo()
    mesh = init_device_mesh("cpu", (world,))
    state = {"block.%d.w%d" % (i // 8, i % 8): distribute_tensor(torch.full((64, 16), float(i)),
                                                                  mesh, [Shard(0)])
             for i in range(args.tensors)}
    targets = {k: distribute_tensor(torch.zeros(64, 16), mesh, [Shard(0)]) for k in state}

    def slowest(body):
        dist.barrier()
        start = time.perf_counter()
        body()
        t = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    saves, loads = [], []
    for rep in range(args.reps):
        where = os.path.join(args.dir, "dcp_%d" % rep)
        saves.append(slowest(lambda: dcp.save(state, checkpoint_id=where)))
        loads.append(slowest(lambda: dcp.load(targets, checkpoint_id=where)))
    same = all(torch.equal(targets[k].to_local(), state[k].to_local()) for k in state)
    if not same:
        sys.exit("dcp_metadata.py: loaded values differ")
    if rank == 0:
        print("dcp np=%d tensors=%d save_s=%.3f load_s=%.3f"
              % (world, args.tensors, statistics.median(saves), statistics.median(loads)), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
