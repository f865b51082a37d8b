"""The peer side of the DDP benchmark: PyTorch's own DistributedDataParallel
(gloo backend) on the same model, batch, loss, optimizer and threads as
bench_ddp.cpp. Run with the project's .venv python (the torch wheel: the same
LibTorch as ours) under the same mpirun as ours; rank and world size come from Open MPI's environment,
the rendezvous from MASTER_ADDR/MASTER_PORT (run.sh picks a free port).

    torch_ddp.py --raw FILE [--round R] [--warmup N] [--iters N]
                 [--optimizer sgd|adamw] [--bucket-cap-mb MB]
                 [--gradient-as-bucket-view 0|1] [--label NAME] [--comm-hook none|fp16|powersgd] [--powersgd-rank R]
                 [--fused 0|1]

--fused 1 (run.sh's default) steps with the optimizer's fused CPU kernel
(torch.optim.SGD/AdamW(fused=True), torch >= 2.4): PyTorch at its best.

Rank 0 appends one CSV row per timed iteration to FILE, with the columns of
bench_ddp.cpp; the all-reduce columns are empty (gloo records none for us).
Times are the max over ranks of each iteration; cpu_ms (the process's CPU
time in the step, gloo's threads included) the mean over ranks.
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_dist import cpu_ms, init_gloo  # noqa: E402

WIDTH, HIDDEN, BLOCKS, BATCH = 512, 2048, 4, 32


def make_model():
    layers = []
    for _ in range(BLOCKS):
        layers += [nn.Linear(WIDTH, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, WIDTH)]
    return nn.Sequential(*layers)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--raw", required=True)
    parser.add_argument("--round", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--gradient-as-bucket-view", type=int, choices=[0, 1], default=1,
                        help="DDP's gradient_as_bucket_view (run.sh passes ours' setting)")
    parser.add_argument("--fused", type=int, choices=[0, 1], default=0,
                        help="the optimizer's fused kernel (torch >= 2.4)")
    parser.add_argument("--label", default="torch", help="the rows' impl column")
    parser.add_argument("--comm-hook", choices=["none", "fp16", "powersgd"], default="none",
                        help="fp16: torch's fp16_compress_hook (all-reduce in fp16; its "
                             "bf16 hook refuses to run without CUDA); powersgd: its powerSGD_hook")
    parser.add_argument("--powersgd-rank", type=int, default=32,
                        help="powersgd: matrix_approximation_rank (it starts after 2 steps, "
                             "the earliest torch allows with error feedback and warm start)")
    args = parser.parse_args()

    torch.set_num_threads(1)
    rank, world = init_gloo()

    torch.manual_seed(0)
    model = DistributedDataParallel(make_model(), bucket_cap_mb=args.bucket_cap_mb,
                                    gradient_as_bucket_view=bool(args.gradient_as_bucket_view))
    if args.comm_hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.comm_hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                            start_powerSGD_iter=2)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9,
                                    fused=bool(args.fused) or None)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01,
                                      fused=bool(args.fused) or None)

    torch.manual_seed(1 + rank)
    inputs = torch.randn(BATCH, WIDTH)
    target = torch.randn(BATCH, WIDTH)

    rows, cpu = [], []
    for it in range(-args.warmup, args.iters):
        if it == 0:
            dist.barrier()
        c0 = cpu_ms()
        t0 = time.perf_counter()
        loss = nn.functional.mse_loss(model(inputs), target)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad()
        t3 = time.perf_counter()
        if it >= 0:
            rows.append([t3 - t0, t1 - t0, t2 - t1, t3 - t2])
            cpu.append(cpu_ms() - c0)

    slowest = torch.tensor(rows, dtype=torch.float64) * 1000.0
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    cpu_mean = torch.tensor(cpu, dtype=torch.float64)
    dist.all_reduce(cpu_mean)
    cpu_mean /= world
    if rank == 0:
        with open(args.raw, "a") as raw:
            for it, (r, c) in enumerate(zip(slowest.tolist(), cpu_mean.tolist())):
                raw.write("%s,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,,,\n"
                          % (args.label, world, args.round, it, r[0], r[1], r[2], r[3], c))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
