#!/usr/bin/env python3
"""The peer of bench_actckpt: the bundled GPT written in PyTorch
(bench/common/torch_gpt.py: the layers of src/models/families/gpt/gpt.cpp, with causal
attention by matmul + masked softmax), one process, AdamW, with and
without torch.utils.checkpoint on every decoder layer (non-reentrant, RNG
state preserved: what our checkpoint does). The reference point for
"recomputation costs about one extra forward".

Step time: median of --iters steps after --warmup (forward, loss, backward,
clip 1.0, AdamW step, zero_grad). Memory: one more forward + backward under
torch.profiler(profile_memory=True); the peak of the running sum of the
bytes each op allocated (net of what it freed) is the bytes allocated above
the starting point, close to the measure bench_actckpt takes with its
counting allocator; kept is that sum when backward starts. Appends one CSV row per setting:
  label,checkpointing,params,step_ms,peak_bytes,kept_bytes

    peer.py --label NAME --csv FILE [--n-layer L] [--n-embd C] [--n-head H]
            [--seq-len T] [--batch B] [--warmup N] [--iters N]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_gpt import GPT, loss_of  # noqa: E402


def measure_memory(model, tokens, targets):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        loss_of(model, tokens, targets).backward()
    # Each op's own allocations (self_cpu_memory_usage, net of its frees):
    # counted at its start when it grows memory, at its end when it frees,
    # so the running sum is an upper envelope of what was allocated.
    events = prof.profiler.function_events
    points = [((e.time_range.start if e.self_cpu_memory_usage > 0 else e.time_range.end), e.self_cpu_memory_usage)
              for e in events if e.self_cpu_memory_usage]
    backward = min((e.time_range.start for e in events if e.name.startswith("autograd::engine")), default=None)
    total = peak = kept = 0
    for at, nbytes in sorted(points):
        if backward is not None and at < backward:
            kept = total + nbytes
        total += nbytes
        peak = max(peak, total)
    return peak, kept


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--label", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = GPT(a.n_layer, a.n_embd, a.n_head, a.seq_len, sdpa=False)
    params = sum(t.numel() for t in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=0.1)
    tokens = torch.randint(256, (a.batch, a.seq_len))
    targets = torch.randint(256, (a.batch, a.seq_len))
    new = not os.path.exists(a.csv)
    with open(a.csv, "a") as out:
        if new:
            out.write("label,checkpointing,params,step_ms,peak_bytes,kept_bytes\n")
        for ckpt in (False, True):
            model.checkpointing = ckpt
            times = []
            for it in range(a.warmup + a.iters):
                t0 = time.perf_counter()
                loss_of(model, tokens, targets).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=False)
                if it >= a.warmup:
                    times.append((time.perf_counter() - t0) * 1e3)
            peak, kept = measure_memory(model, tokens, targets)
            opt.zero_grad(set_to_none=False)
            step_ms = statistics.median(times)
            out.write("%s,%d,%d,%.3f,%d,%d\n" % (a.label, int(ckpt), params, step_ms, peak, kept))
            print("peer %s torch %s checkpointing %s: step %.1f ms, peak %.2f MiB, kept %.2f MiB" % (
                a.label, torch.__version__, "on" if ckpt else "off", step_ms, peak / 2**20, kept / 2**20))


if __name__ == "__main__":
    main()
