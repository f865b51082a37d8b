"""The peer of bench/eager: the bundled GPT (bench/common/torch_gpt.py) trained
by PyTorch eager in one process, the step bench_fsdp times for ours:
forward and loss, backward, then the optimizer phase (clip_grad_norm_ 1.0,
AdamW step, zero_grad(set_to_none=True)), with the trainer's AdamW defaults
and its two parameter groups, on fixed random tokens, one torch thread.

    torch_eager.py --label NAME --csv FILE [--optimizer default|fused]
                   [--precision fp32|bf16] [--n-layer L] [--n-embd E] [--n-head H]
                   [--seq-len T] [--batch B] [--warmup N] [--iters N]

--optimizer default is torch.optim.AdamW as a user gets it (the for-loop
implementation on the CPU); fused is AdamW(fused=True), the fused CPU kernel
of torch >= 2.4. --precision bf16 runs forward and loss under
torch.autocast("cpu", torch.bfloat16), as ours does under mixed_precision=bf16.
Appends one CSV row (medians over the timed steps):
  label,impl,precision,params,step_ms,forward_ms,backward_ms,optimizer_ms
"""
import argparse
import contextlib
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_gpt import GPT, param_groups, timed_step  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--label", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--optimizer", choices=["default", "fused"], default="default")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--n-layer", type=int, default=8)
    p.add_argument("--n-embd", type=int, default=704)
    p.add_argument("--n-head", type=int, default=11)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=8)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = GPT(a.n_layer, a.n_embd, a.n_head, a.seq_len)
    # [optimizer] defaults of ours: lr 1e-3, betas 0.9/0.999, eps 1e-8, weight_decay 0.01, grad_clip 1.0.
    optimizer = torch.optim.AdamW(param_groups(model, 0.01), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                  fused=a.optimizer == "fused" or None)
    tokens = torch.randint(256, (a.batch, a.seq_len))
    targets = torch.randint(256, (a.batch, a.seq_len))
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.precision == "bf16" \
        else contextlib.nullcontext
    rows = []
    for it in range(a.warmup + a.iters):
        times = timed_step(model, optimizer, tokens, targets, autocast)
        if it >= a.warmup:
            rows.append(times)
    medians = [statistics.median(column) for column in zip(*rows)]
    params = sum(t.numel() for t in model.parameters())
    new = not os.path.exists(a.csv)
    with open(a.csv, "a") as out:
        if new:
            out.write("label,impl,precision,params,step_ms,forward_ms,backward_ms,optimizer_ms\n")
        out.write(f"{a.label},torch_{a.optimizer},{a.precision},{params},"
                  + ",".join(f"{m:.1f}" for m in medians) + "\n")
    print(f"torch_eager: {a.optimizer} AdamW, {a.precision}: step {medians[0]:.0f} ms "
          f"(forward {medians[1]:.0f}, backward {medians[2]:.0f}, optimizer {medians[3]:.0f})")


if __name__ == "__main__":
    main()
