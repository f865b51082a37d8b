"""The peer of bench_gpu_gpt: the same GPT-2 small in PyTorch eager mode, on
the same GPU, batch and sequence length, with what a careful PyTorch user
turns on: bf16 autocast, F.scaled_dot_product_attention, AdamW(fused=True)
with weight decay on matrices only, gradient clipping at 1.0. The model is
ours line for line (bench/common/torch_gpt.py: fused qkv projection, pre-LN
blocks, exact GELU, tied head, no dropout), so the two do the same arithmetic.

    python3 eager_gpt.py [BATCH SEQ STEPS WARMUP]

MPIACCEL_BENCH_DEVICE=cpu runs it on the CPU (a smoke test of the script).

Prints: eager parameters=... tokens_per_s=... mfu=... step_ms=...
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_gpt import GPT, param_groups  # noqa: E402

PEAK_FLOPS = 989.4e12  # H200 dense bf16, datasheet (as bench_gpu_gpt.cpp)
LAYERS, HEADS, WIDTH, VOCAB = 12, 12, 768, 50304


def main():
    given = [int(a) for a in sys.argv[1:]]
    batch, seq, steps, warmup = given + [16, 1024, 20, 5][len(given):]
    device = os.environ.get("MPIACCEL_BENCH_DEVICE", "cuda")
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    torch.manual_seed(1)
    model = GPT(LAYERS, WIDTH, HEADS, seq, vocab=VOCAB).to(device)
    optimizer = torch.optim.AdamW(param_groups(model, 0.1), lr=6e-4, betas=(0.9, 0.95), fused=device == "cuda")

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
