"""The peer of bench_gpu_gpt: the same GPT-2 small in PyTorch eager mode, on
the same GPU, batch and sequence length, with what a careful PyTorch user
turns on: bf16 autocast, F.scaled_dot_product_attention, AdamW(fused=True)
with weight decay on matrices only, gradient clipping at 1.0. The model is
ours line for line (fused qkv projection, pre-LN blocks, exact GELU, tied
head, no dropout), so the two do the same arithmetic.

    python3 eager_gpt.py [BATCH SEQ STEPS WARMUP]

MPIACCEL_BENCH_DEVICE=cpu runs it on the CPU (a smoke test of the script).

Prints: eager parameters=... tokens_per_s=... mfu=... step_ms=...
"""
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PEAK_FLOPS = 989.4e12  # H200 dense bf16, datasheet (as bench_gpu_gpt.cpp)
LAYERS, HEADS, WIDTH, VOCAB = 12, 12, 768, 50304


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        heads = lambda z: z.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(WIDTH), Attention()
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.fc, self.proj = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class Gpt(nn.Module):
    def __init__(self, seq):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(seq, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(WIDTH)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    given = [int(a) for a in sys.argv[1:]]
    batch, seq, steps, warmup = given + [16, 1024, 20, 5][len(given):]
    device = os.environ.get("MPIACCEL_BENCH_DEVICE", "cuda")
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    torch.manual_seed(1)
    model = Gpt(seq).to(device)
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    plain = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1},
                                   {"params": plain, "weight_decay": 0.0}],
                                  lr=6e-4, betas=(0.9, 0.95), fused=device == "cuda")

    def step():
        tokens = torch.randint(0, VOCAB, (batch, seq + 1), device=device)
        with torch.autocast(device, dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    seconds = time.perf_counter() - start
    parameters = sum(p.numel() for p in model.parameters())
    flops_per_token = 6.0 * (parameters - seq * WIDTH) + 12.0 * LAYERS * WIDTH * seq
    tokens_per_s = steps * batch * seq / seconds
    print(f"eager parameters={parameters} batch={batch} seq={seq} tokens_per_s={tokens_per_s:.0f} "
          f"mfu={tokens_per_s * flops_per_token / PEAK_FLOPS:.4f} step_ms={1000 * seconds / steps:.2f}")


if __name__ == "__main__":
    main()
