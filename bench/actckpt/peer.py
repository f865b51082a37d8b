#!/usr/bin/env python3
"""The peer of bench_actckpt: the bundled GPT written in PyTorch (the same
layers as src/models/gpt.cpp: pre-LayerNorm decoder layers, causal attention
by matmul + masked softmax, GELU MLP, tied head), one process, AdamW, with and
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
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Attention(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, 2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.h))
        future = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = F.softmax(att.masked_fill(future, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class DecoderLayer(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c)
        self.attn = Attention(c, h)
        self.ln_2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.proj = nn.Linear(4 * c, c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, layers, c, h, t, vocab=256):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(t, c)
        self.blocks = nn.ModuleList(DecoderLayer(c, h) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        self.checkpointing = False

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointing else block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def loss_of(model, tokens, targets):
    logits = model(tokens)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


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
    model = GPT(a.n_layer, a.n_embd, a.n_head, a.seq_len)
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
