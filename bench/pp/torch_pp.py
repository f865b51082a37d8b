"""The PyTorch peer of the pipeline-parallelism benchmark: transformers'
LlamaForCausalLM (the .venv's, SDPA attention, untied head, fp32) cut into
stages of consecutive decoder layers and trained with
torch.distributed.pipelining over gloo on the CPU, one thread per rank.
Launched by mpirun (bench/common/torch_dist.py joins gloo).

The model is built identically on every rank (seed 0), then cut into
S = ranks x (virtual stages for interleaved_1f1b, else 1) stages of L/S
layers; stage s lives on rank s % ranks. The first stage also runs the
token embedding, the last the final norm and the head; every stage computes
the rotary embeddings for positions 0..T-1 and calls its layers with no
attention mask (SDPA is then causal). Each stage is a PipelineStage, driven
by ScheduleGPipe, Schedule1F1B or ScheduleInterleaved1F1B with the batch cut
into M microbatches and the mean cross-entropy per microbatch as the loss.

A step is schedule.step (forward, loss and backward of every microbatch),
AdamW (lr 1e-4) over the rank's stage parameters, zero_grad. Times are the
slowest rank's per step, then the median over the timed steps.

    torch_pp.py --label NAME --csv FILE [--warmup N] [--iters N]
      model:    --n-layer L --n-embd E --n-head H --n-kv-head K --intermediate I --vocab V
      batch:    --seq-len T --batch B --microbatches M
      pipeline: --schedule {gpipe,1f1b,interleaved_1f1b} [--virtual-stages V (interleaved_1f1b only)]

Appends: label,impl,pp,schedule,microbatches,step_ms
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_dist import init_gloo  # noqa: E402

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "interleaved_1f1b": ScheduleInterleaved1F1B}


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--label", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--n-layer", type=int, required=True)
    p.add_argument("--n-embd", type=int, required=True)
    p.add_argument("--n-head", type=int, required=True)
    p.add_argument("--n-kv-head", type=int, required=True)
    p.add_argument("--intermediate", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--microbatches", type=int, required=True)
    p.add_argument("--schedule", choices=sorted(SCHEDULES), required=True)
    p.add_argument("--virtual-stages", type=int, default=2)
    return p.parse_args()


def build(a):
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=a.vocab, hidden_size=a.n_embd, intermediate_size=a.intermediate,
                         num_hidden_layers=a.n_layer, num_attention_heads=a.n_head,
                         num_key_value_heads=a.n_kv_head, max_position_embeddings=a.seq_len,
                         tie_word_embeddings=False, attention_dropout=0.0, rms_norm_eps=1e-5,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                         attn_implementation="sdpa")
    torch.manual_seed(0)  # the same weights on every rank
    return LlamaForCausalLM(config).float()


class Stage(nn.Module):
    """Consecutive decoder layers of the model; the first stage also embeds
    the tokens, the last also runs the final norm and the head (logits)."""

    def __init__(self, model, layers, first, last, seq_len):
        super().__init__()
        self.embed = model.model.embed_tokens if first else None
        self.layers = nn.ModuleList(layers)
        self.rotary = model.model.rotary_emb
        self.norm = model.model.norm if last else None
        self.head = model.lm_head if last else None
        self.register_buffer("position_ids", torch.arange(seq_len).unsqueeze(0), persistent=False)

    def forward(self, x):
        h = self.embed(x) if self.embed is not None else x
        position_ids = self.position_ids[:, :h.shape[1]]
        position_embeddings = self.rotary(h, position_ids=position_ids)
        for layer in self.layers:
            # A None mask with T > 1 makes transformers' SDPA call causal.
            out = layer(h, attention_mask=None, position_ids=position_ids,
                        position_embeddings=position_embeddings)
            h = out[0] if isinstance(out, tuple) else out
        if self.head is not None:
            h = self.head(self.norm(h))
        return h


def stage_indices(a, rank, world):
    """(this rank's stage indices, total stages); stage s lives on rank s % world."""
    n_stages = world * (a.virtual_stages if a.schedule == "interleaved_1f1b" else 1)
    if a.n_layer % n_stages:
        sys.exit(f"torch_pp: --n-layer {a.n_layer} is not divisible by the {n_stages} stages")
    if a.batch % a.microbatches:
        sys.exit(f"torch_pp: --batch {a.batch} is not divisible by --microbatches {a.microbatches}")
    return list(range(rank, n_stages, world)), n_stages


def make_stages(model, indices, n_stages, a):
    per = a.n_layer // n_stages
    stages = []
    for s in indices:
        layers = model.model.layers[s * per:(s + 1) * per]
        module = Stage(model, layers, s == 0, s == n_stages - 1, a.seq_len)
        stages.append(PipelineStage(module, s, n_stages, torch.device("cpu")))
    return stages


def loss_fn(logits, target):
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


def make_schedule(a, stages):
    cls = SCHEDULES[a.schedule]
    if a.schedule == "interleaved_1f1b":
        return cls(stages, n_microbatches=a.microbatches, loss_fn=loss_fn)
    return cls(stages[0], n_microbatches=a.microbatches, loss_fn=loss_fn)


def train_step(schedule, optimizer, first, last, tokens, targets, losses):
    """One step on this rank: the pipeline schedule, AdamW, zero_grad. Returns ms."""
    losses.clear()
    t0 = time.perf_counter()
    args = (tokens,) if first else ()
    kwargs = {"target": targets, "losses": losses} if last else {}
    schedule.step(*args, **kwargs)
    optimizer.step()
    optimizer.zero_grad()
    return (time.perf_counter() - t0) * 1e3


def last_loss(losses, last, last_rank):
    """The last step's mean microbatch loss, broadcast from the last stage's rank."""
    loss = torch.zeros((), dtype=torch.float64)
    if last:
        loss.fill_(torch.stack([l.detach() for l in losses]).double().mean().item())
    dist.broadcast(loss, src=last_rank)
    return float(loss)


def unsplit_loss(model, tokens, targets):
    """The whole model's loss on the step's batch, before any step."""
    with torch.no_grad():
        return float(loss_fn(model(tokens).logits, targets))


def write_row(a, world, step_ms):
    new = not os.path.exists(a.csv)
    with open(a.csv, "a") as out:
        if new:
            out.write("label,impl,pp,schedule,microbatches,step_ms\n")
        out.write(f"{a.label},torch,{world},{a.schedule},{a.microbatches},{step_ms:.1f}\n")


def main():
    a = parse_args()
    rank, world = init_gloo()
    torch.set_num_threads(1)
    indices, n_stages = stage_indices(a, rank, world)
    model = build(a)
    stages = make_stages(model, indices, n_stages, a)
    first, last = 0 in indices, n_stages - 1 in indices
    schedule = make_schedule(a, stages)
    params = list({id(q): q for st in stages for q in st.submod.parameters()}.values())
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    torch.manual_seed(1)  # the same batch on every rank
    tokens = torch.randint(a.vocab, (a.batch, a.seq_len))
    targets = torch.randint(a.vocab, (a.batch, a.seq_len))
    reference = unsplit_loss(model, tokens, targets)
    losses = []
    times = []
    for it in range(a.warmup + a.iters):
        dist.barrier()
        ms = train_step(schedule, optimizer, first, last, tokens, targets, losses)
        if it == 0:  # the pipeline computes what the whole model does
            first_loss = last_loss(losses, last, (n_stages - 1) % world)
            if abs(first_loss - reference) > 1e-4 * abs(reference):
                sys.exit(f"torch_pp: the pipelined loss {first_loss:.6f} is not the unsplit model's {reference:.6f}")
        if it >= a.warmup:
            times.append(ms)
    times = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)  # a step is as slow as its slowest rank
    step_ms = statistics.median(times.tolist())
    loss = last_loss(losses, last, (n_stages - 1) % world)
    if rank == 0:
        write_row(a, world, step_ms)
        print(f"torch pipelining pp {world} {a.schedule} m {a.microbatches}: {step_ms:.1f} ms/step")
        print(f"torch pipelining: first step's loss {first_loss:.6f} (the unsplit model's {reference:.6f}), "
              f"last step's {loss:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
