"""The peer of bench/tp: transformers' LlamaForCausalLM (the .venv's, SDPA
attention, untied head) split by PyTorch's own tensor parallelism: a 1-D
DeviceMesh over gloo on the CPU, parallelize_module with ColwiseParallel on
q, k, v, gate and up, RowwiseParallel on o and down, the embedding
RowwiseParallel (vocabulary rows) and the head ColwiseParallel with its
logits left sharded for loss_parallel (the logits are never gathered, as
ours). Launched by mpirun (bench/common/torch_dist.py joins gloo).

A step is what bench_fsdp times for ours: forward and loss, backward, the
gradient norm clipped at 1.0 (each split parameter's local squares summed
over the group, the whole ones counted once), AdamW (lr 1e-3, weight decay
0.01 on matrices, the default for-loop CPU implementation: fused=True does
not take DTensor parameters), zero_grad(set_to_none=True). Times are the
slowest rank's per step, then the median. Model-state bytes: the local
tensors of the parameters, their gradients and the optimizer's state on
rank 0.

    torch_tp.py --label NAME --csv FILE [--warmup N] [--iters N] [sizes as bench_fsdp]

Appends: label,impl,ranks,params,step_ms,forward_ms,backward_ms,optimizer_ms,param_bytes,grad_bytes,optimizer_bytes
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, loss_parallel, parallelize_module

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_dist import init_gloo  # noqa: E402


def build(a):
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=a.vocab, hidden_size=a.n_embd, intermediate_size=a.intermediate,
                         num_hidden_layers=a.n_layer, num_attention_heads=a.n_head,
                         num_key_value_heads=a.n_kv_head, max_position_embeddings=a.seq_len,
                         rms_norm_eps=1e-5, tie_word_embeddings=False, attn_implementation="sdpa")
    return LlamaForCausalLM(config)


def split(model, mesh):
    for layer in model.model.layers:
        parallelize_module(layer, mesh, {
            "self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel(),
        })
    parallelize_module(model, mesh, {
        "model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
        "lm_head": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False),
    })


def local(t):
    return t.to_local() if isinstance(t, DTensor) else t


def clip(params, max_norm, group):
    split_sq = torch.zeros((), dtype=torch.float64)
    whole_sq = torch.zeros((), dtype=torch.float64)
    for p in params:
        if p.grad is None:
            continue
        sq = local(p.grad).double().pow(2).sum()
        if isinstance(p.grad, DTensor) and any(isinstance(s, Shard) for s in p.grad.placements):
            split_sq += sq
        else:
            whole_sq += sq
    dist.all_reduce(split_sq, group=group)
    norm = math.sqrt(float(split_sq + whole_sq))
    if norm > max_norm:
        for p in params:
            if p.grad is not None:
                local(p.grad).mul_(max_norm / (norm + 1e-6))
    return norm


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--label", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=512)
    p.add_argument("--n-head", type=int, default=8)
    p.add_argument("--n-kv-head", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=1408)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    a = p.parse_args()
    rank, world = init_gloo()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    mesh = init_device_mesh("cpu", (world,))
    model = build(a)
    split(model, mesh)
    params = [q for q in model.parameters() if q.requires_grad]
    decay = [q for q in params if q.dim() >= 2]
    rest = [q for q in params if q.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                                  lr=1e-3, foreach=False)
    torch.manual_seed(1)  # the same batch on every rank of the group
    tokens = torch.randint(a.vocab, (a.batch, a.seq_len))
    targets = torch.randint(a.vocab, (a.batch, a.seq_len))
    group = mesh.get_group()
    rows = []
    for it in range(a.warmup + a.iters):
        dist.barrier()
        t0 = time.perf_counter()
        with loss_parallel():
            logits = model(input_ids=tokens, use_cache=False).logits
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
            t1 = time.perf_counter()
            loss.backward()
        t2 = time.perf_counter()
        clip(params, 1.0, group)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if it >= a.warmup:
            rows.append([(t3 - t0) * 1e3, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3])
    times = torch.tensor(rows, dtype=torch.float64)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)  # a step is as slow as its slowest rank
    medians = [statistics.median(c) for c in times.t().tolist()]
    # Model state after a step's backward: parameters, gradients, optimizer state (local tensors).
    with loss_parallel():
        loss = torch.nn.functional.cross_entropy(model(input_ids=tokens, use_cache=False).logits.flatten(0, 1),
                                                 targets.flatten())
        loss.backward()
    nbytes = lambda t: local(t).numel() * local(t).element_size()
    param_bytes = sum(nbytes(q) for q in params)
    grad_bytes = sum(nbytes(q.grad) for q in params if q.grad is not None)
    optimizer_bytes = sum(nbytes(v) for s in optimizer.state.values() for v in s.values()
                          if torch.is_tensor(v) and v.dim() > 0)
    local_params = sum(local(q).numel() for q in params)
    if rank == 0:
        new = not os.path.exists(a.csv)
        with open(a.csv, "a") as out:
            if new:
                out.write("label,impl,ranks,params,step_ms,forward_ms,backward_ms,optimizer_ms,"
                          "param_bytes,grad_bytes,optimizer_bytes\n")
            out.write(f"{a.label},torch_dtensor,{world},{local_params},"
                      + ",".join(f"{m:.1f}" for m in medians)
                      + f",{param_bytes},{grad_bytes},{optimizer_bytes}\n")
        print(f"torch_tp: tp {world}: step {medians[0]:.0f} ms (forward {medians[1]:.0f}, backward {medians[2]:.0f}, "
              f"optimizer {medians[3]:.0f}); state {(param_bytes + grad_bytes + optimizer_bytes) / 2**20:.1f} MiB/rank")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
