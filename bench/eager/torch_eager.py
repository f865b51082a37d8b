"""The peer of bench/eager (and of bench/llama): the bundled GPT
(bench/common/torch_gpt.py), or with --model llama transformers'
LlamaForCausalLM (the .venv's transformers, its SDPA attention), trained
by PyTorch eager in one process, the step bench_fsdp times for ours:
forward and loss, backward, then the optimizer phase (clip_grad_norm_ 1.0,
AdamW step, zero_grad(set_to_none=True)), with the trainer's AdamW defaults
and its two parameter groups, on fixed random tokens, one torch thread.

    torch_eager.py --label NAME --csv FILE [--optimizer default|fused]
                   [--precision fp32|bf16] [--n-layer L] [--n-embd E] [--n-head H]
                   [--seq-len T] [--batch B] [--warmup N] [--iters N]
                   [--model gpt|llama] [--n-kv-head K] [--intermediate I] [--vocab V]

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


class Logits(torch.nn.Module):
    """transformers' model as a module that maps tokens to logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens):
        return self.model(input_ids=tokens, use_cache=False).logits


def llama(a):
    """LlamaForCausalLM of the sizes bench_fsdp --model llama builds (untied head)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=a.vocab, hidden_size=a.n_embd, intermediate_size=a.intermediate,
                         num_hidden_layers=a.n_layer, num_attention_heads=a.n_head,
                         num_key_value_heads=a.n_kv_head or a.n_head, max_position_embeddings=a.seq_len,
                         rms_norm_eps=1e-5, tie_word_embeddings=False, attn_implementation="sdpa")
    return Logits(LlamaForCausalLM(config))


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
    p.add_argument("--model", choices=["gpt", "llama"], default="gpt")
    p.add_argument("--n-kv-head", type=int, default=0)
    p.add_argument("--intermediate", type=int, default=0)
    p.add_argument("--vocab", type=int, default=256)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = GPT(a.n_layer, a.n_embd, a.n_head, a.seq_len) if a.model == "gpt" else llama(a)
    # [optimizer] defaults of ours: lr 1e-3, betas 0.9/0.999, eps 1e-8, weight_decay 0.01, grad_clip 1.0.
    optimizer = torch.optim.AdamW(param_groups(model, 0.01), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                  fused=a.optimizer == "fused" or None)
    tokens = torch.randint(a.vocab, (a.batch, a.seq_len))
    targets = torch.randint(a.vocab, (a.batch, a.seq_len))
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
