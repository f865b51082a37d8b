"""Shared by the DCP peers of bench/ckpt (dcp_gpt.py, dcp_metadata.py): one
torch thread, rank and world size from Open MPI's environment, a gloo process
group through MASTER_ADDR (default 127.0.0.1) / MASTER_PORT."""

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist


def env_int(*names):
    for name in names:
        if name in os.environ:
            return int(os.environ[name])
    sys.exit("%s: none of %s is set: run it under mpirun" % (os.path.basename(sys.argv[0]), ", ".join(names)))


def init_gloo():
    """Returns (rank, world size) after joining the gloo process group."""
    torch.set_num_threads(1)
    rank = env_int("OMPI_COMM_WORLD_RANK", "RANK")
    world = env_int("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=600))
    return rank, world
