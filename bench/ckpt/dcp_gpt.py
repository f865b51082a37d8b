"""The peer side of the asynchronous-checkpoint benchmark (async.sh):
PyTorch's Distributed Checkpoint (DCP) saving the same GPT (bench/gpu's
eager_gpt, ours line for line, at the size async.sh gives) with AdamW state,
under DistributedDataParallel (gloo) on the same ranks, from the project's
virtual environment (torch 2.x). Rank and world size come from Open MPI's
environment, the rendezvous from MASTER_ADDR/MASTER_PORT.

    dcp_gpt.py DIR --layers L --heads H --width W --vocab V --seq S [--steps N]

It trains `--steps` plain steps (the first two are warm-up), then times
dcp.save (the training stall of a synchronous save), more steps, then two
rounds of dcp.async_save (the second's figures reported, the first's stall
beside them; its stall: the call's return, which includes DCP's staging
copy and planning), steps while the background write runs, and the wait.
Rank 0 prints one line of key=value figures, each the max over ranks.
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
import eager_gpt  # noqa: E402
from gloo_under_mpirun import init_gloo  # noqa: E402  (this directory)


def build(args):
    eager_gpt.LAYERS, eager_gpt.HEADS = args.layers, args.heads
    eager_gpt.WIDTH, eager_gpt.VOCAB = args.width, args.vocab
    torch.manual_seed(42)
    model = eager_gpt.Gpt(args.seq)
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    for name in ("layers", "heads", "width", "vocab", "seq"):
        parser.add_argument("--" + name, type=int, required=True)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    rank, world = init_gloo()
    checkpoint_group = dist.new_group(backend="gloo")  # DCP's advice for async_save

    model = DistributedDataParallel(build(args))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": other, "weight_decay": 0.0}],
                                  lr=2e-3, betas=(0.9, 0.95))
    generator = torch.Generator().manual_seed(rank)

    def step():
        start = time.perf_counter()
        tokens = torch.randint(0, args.vocab, (1, args.seq + 1), generator=generator)
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, args.vocab), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return time.perf_counter() - start

    normal = [step() for _ in range(args.steps)][2:]

    def state():
        model_state, optim_state = get_state_dict(model, optimizer)
        return {"model": model_state, "optim": optim_state}

    state_bytes = sum(t.numel() * t.element_size() for part in state().values()
                      for t in _tensors(part))
    dist.barrier()
    start = time.perf_counter()
    dcp.save(state(), checkpoint_id=os.path.join(args.dir, "sync"), process_group=checkpoint_group)
    sync_save = time.perf_counter() - start
    normal += [step() for _ in range(2)]

    def async_round(name):
        dist.barrier()
        start = time.perf_counter()
        pending = dcp.async_save(state(), checkpoint_id=os.path.join(args.dir, name),
                                 process_group=checkpoint_group)
        stall = time.perf_counter() - start
        future = getattr(pending, "upload_completion", pending)
        during = []
        # Every rank steps until every rank's write is done (agreed each step,
        # as our poll_checkpoint does): DDP needs the same steps on all ranks.
        while len(during) < 50:
            done = torch.tensor([1 if future.done() else 0])
            dist.all_reduce(done, op=dist.ReduceOp.MIN)
            if done.item():
                break
            during.append(step())
        start = time.perf_counter()
        future.result()
        return stall, during, stall + sum(during) + time.perf_counter() - start

    first_stall, _, _ = async_round("async1")
    normal += [step() for _ in range(2)]
    async_stall, during, write_total = async_round("async2")
    figures = torch.tensor([sync_save, async_stall, first_stall, sorted(normal)[len(normal) // 2],
                            sum(during) / len(during) if during else 0.0, write_total],
                           dtype=torch.float64)
    dist.all_reduce(figures, op=dist.ReduceOp.MAX)
    if rank == 0:
        sync_save, async_stall, first_stall, normal_step, during_step, write_total = figures.tolist()
        print("dcp np=%d state_bytes=%d sync_save_s=%.3f async_stall_s=%.3f (first %.3f) "
              "normal_step_s=%.3f steps_during_write=%d during_step_s=%.3f slowdown=%.2f "
              "async_write_s=%.3f"
              % (world, state_bytes, sync_save, async_stall, first_stall, normal_step, len(during), during_step,
                 during_step / normal_step if during else 0.0, write_total), flush=True)
    dist.destroy_process_group()


def _tensors(tree):
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, dict):
        for value in tree.values():
            yield from _tensors(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from _tensors(value)


if __name__ == "__main__":
    main()
