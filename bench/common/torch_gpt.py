"""The bundled GPT (src/models/families/gpt/gpt.cpp) written in PyTorch, layer for layer:
token and position embeddings, pre-LayerNorm decoder layers (fused qkv
projection, causal attention, exact GELU MLP), a final LayerNorm and a head
tied to the token embedding, no dropout. The peers of bench/eager,
bench/actckpt and bench/gpu build it, so each does the arithmetic ours does.

Attention is F.scaled_dot_product_attention(is_causal=True), what ours runs on
LibTorch 2.x; sdpa=False spells it out as matmul + mask + softmax, what ours
runs on LibTorch 1.13.
"""
import contextlib
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Attention(nn.Module):
    def __init__(self, c, h, sdpa):
        super().__init__()
        self.h, self.sdpa = h, sdpa
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, 2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.h))
            future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = F.softmax(att.masked_fill(future, float("-inf")), dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class DecoderLayer(nn.Module):
    def __init__(self, c, h, sdpa):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c)
        self.attn = Attention(c, h, sdpa)
        self.ln_2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.proj = nn.Linear(4 * c, c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    """GPT(layers, width, heads, context[, vocab][, sdpa]); `checkpointing`
    recomputes every decoder layer in backward (torch.utils.checkpoint,
    non-reentrant, RNG state preserved: what our activation checkpointing does)."""

    def __init__(self, layers, c, h, t, vocab=256, sdpa=True):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(t, c)
        self.blocks = nn.ModuleList(DecoderLayer(c, h, sdpa) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        self.checkpointing = False

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointing else block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def loss_of(model, tokens, targets):
    logits = model(tokens)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def param_groups(model, weight_decay):
    """The trainer's two AdamW groups (src/optim/optimizer_factory.cpp): matrices
    and embeddings with weight decay, biases and norms without."""
    return [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]


def timed_step(model, optimizer, tokens, targets, autocast=contextlib.nullcontext):
    """The step bench_fsdp times for ours: forward and loss (under `autocast`),
    backward, then clip_grad_norm_ 1.0, the optimizer step and
    zero_grad(set_to_none=True). Returns [step, forward, backward, optimizer]
    in milliseconds."""
    t0 = time.perf_counter()
    with autocast():
        loss = loss_of(model, tokens, targets)
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    t3 = time.perf_counter()
    return [(t3 - t0) * 1e3, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3]
