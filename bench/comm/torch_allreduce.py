"""The gloo peer of bench_comm's all-reduce: torch.distributed.all_reduce of
float32 tensors over gloo (the .venv's torch), the same sizes (4 KiB to
MAX_BYTES, x4), best of three rounds of the mean time per call, max over
ranks. Started by mpirun (rank and size from Open MPI's environment,
MASTER_ADDR/MASTER_PORT given).

    torch_allreduce.py CSV_PATH MAX_BYTES [--label NAME]

Appends "label,ranks,bytes,iters,us,algbw_GBps,busbw_GBps" rows (rank 0).
"""
import argparse
import os
import time

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("csv")
    parser.add_argument("max_bytes", type=int)
    parser.add_argument("--label", default="gloo")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    rows = []
    size = 4096
    while size <= args.max_bytes:
        tensor = torch.ones(size // 4)
        iters = max(3, min(200, (256 << 20) // size))
        best = float("inf")
        for _ in range(3):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(tensor)
            elapsed = torch.tensor([(time.perf_counter() - start) / iters])
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            best = min(best, elapsed.item())
        algbw = size / best / 1e9
        rows.append((size, iters, best * 1e6, algbw, algbw * 2 * (world - 1) / world))
        size *= 4
    if rank == 0:
        new = not os.path.exists(args.csv)
        with open(args.csv, "a") as out:
            if new:
                out.write("label,ranks,bytes,iters,us,algbw_GBps,busbw_GBps\n")
            for size, iters, us, algbw, busbw in rows:
                out.write(f"{args.label},{world},{size},{iters},{us:.1f},{algbw:.4f},{busbw:.4f}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
