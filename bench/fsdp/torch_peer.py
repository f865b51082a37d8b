"""The PyTorch side of the strategy benchmark: the bundled GPT
(bench/common/torch_gpt.py) under torch's own DistributedDataParallel or
FSDP2 (torch.distributed.fsdp.fully_shard, one unit per DecoderLayer then the
root: what ours does with TRANSFORMER_BASED_WRAP on DecoderLayer), over gloo,
with the step bench_fsdp times for ours: forward and loss, backward, then
clip_grad_norm_ 1.0, AdamW (the trainer's defaults and two parameter groups;
fused=True, PyTorch at its best on the CPU, where the parameters allow it),
zero_grad(set_to_none=True). Run with the .venv's python (the torch wheel:
the LibTorch we link) under the same mpirun as ours; rank and world size
come from Open MPI's environment, the rendezvous from MASTER_ADDR and
MASTER_PORT (run.sh picks a free port).

    torch_peer.py --strategy ddp|fsdp --csv FILE [--label NAME] [--warmup N]
                  [--iters N] [--n-layer L] [--n-embd E] [--n-head H]
                  [--seq-len T] [--batch B]

Rank 0 appends one row to FILE with bench_fsdp's columns: times as ours (the
slowest rank of each step, median over steps; cpu_ms the process CPU time,
mean over ranks), peak_rss_bytes the largest ru_maxrss; model-state columns
are 0 (torch keeps no account of them).
"""
import argparse
import os
import resource
import statistics
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_dist import cpu_ms, init_gloo  # noqa: E402
from torch_gpt import GPT, param_groups, timed_step  # noqa: E402


def wrap(model, strategy):
    if strategy == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True)
    from torch.distributed.fsdp import fully_shard
    for block in model.blocks:
        fully_shard(block)
    return fully_shard(model)


def make_optimizer(model):
    # [optimizer] defaults of ours: lr 1e-3, betas 0.9/0.999, eps 1e-8, weight_decay 0.01.
    try:
        return torch.optim.AdamW(param_groups(model, 0.01), lr=1e-3, fused=True), "fused"
    except (RuntimeError, TypeError) as e:  # parameters the fused kernel refuses
        print("torch_peer.py: fused AdamW refused (%s); the default one instead" % e, file=sys.stderr)
        return torch.optim.AdamW(param_groups(model, 0.01), lr=1e-3), "default"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--strategy", choices=["ddp", "fsdp"], required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--label", default=None)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--n-layer", type=int, default=8)
    p.add_argument("--n-embd", type=int, default=704)
    p.add_argument("--n-head", type=int, default=11)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    a = p.parse_args()
    label = a.label or "torch_" + a.strategy

    torch.set_num_threads(1)
    rank, world = init_gloo()

    torch.manual_seed(0)
    model = GPT(a.n_layer, a.n_embd, a.n_head, a.seq_len)
    params = sum(t.numel() for t in model.parameters())  # before sharding
    model = wrap(model, a.strategy)
    optimizer, kind = make_optimizer(model)
    torch.manual_seed(1 + rank)
    tokens = torch.randint(256, (a.batch, a.seq_len))
    targets = torch.randint(256, (a.batch, a.seq_len))

    rows = []
    for it in range(-a.warmup, a.iters):
        if it == 0:
            dist.barrier()
        c0 = cpu_ms()
        times = timed_step(model, optimizer, tokens, targets)
        if it >= 0:
            rows.append(times + [cpu_ms() - c0])

    times = torch.tensor(rows, dtype=torch.float64)
    slowest = times.clone()
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    mean = times.clone()
    dist.all_reduce(mean)
    mean /= world
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0], dtype=torch.float64)
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        med = [statistics.median(c) for c in slowest[:, :4].t().tolist()]
        cpu = statistics.median(mean[:, 4].tolist())
        new = not os.path.exists(a.csv)
        with open(a.csv, "a") as out:
            if new:
                out.write("label,strategy,ranks,params,step_ms,forward_ms,backward_ms,optimizer_ms,cpu_ms,"
                          "param_bytes,grad_bytes,optimizer_bytes,state_bytes,formula,formula_bytes,"
                          "largest_unit_bytes,warmup_state_bytes,peak_rss_bytes\n")
            out.write("%s,torch_%s_%s_adamw,%d,%d,%.1f,%.1f,%.1f,%.1f,%.1f,0,0,0,0,-,0,0,0,%.0f\n"
                      % (label, a.strategy, kind, world, params, *med, cpu, rss.item()))
        print("torch_peer: %s, %s AdamW, np %d: step %.0f ms (forward %.0f, backward %.0f, optimizer %.0f)"
              % (a.strategy, kind, world, *med))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
