"""What the PyTorch peers that run under mpirun share (bench/ddp/torch_ddp.py,
bench/fsdp/torch_peer.py): joining a gloo process group from Open MPI's
environment, and the process CPU time."""
import os
import resource
import sys
from datetime import timedelta

import torch.distributed as dist


def env_int(*names):
    for name in names:
        if name in os.environ:
            return int(os.environ[name])
    sys.exit("%s: none of %s is set: run it under mpirun (or set RANK/WORLD_SIZE)"
             % (os.path.basename(sys.argv[0]), ", ".join(names)))


def init_gloo():
    """Joins the gloo group of this mpirun: rank and world size from Open
    MPI's environment, the rendezvous at MASTER_ADDR (127.0.0.1 if unset) and
    MASTER_PORT (the run.sh scripts pick a free one). Returns (rank, world)."""
    rank = env_int("OMPI_COMM_WORLD_RANK", "RANK")
    world = env_int("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        sys.exit("%s: MASTER_PORT is not set (run.sh chooses a free one)" % os.path.basename(sys.argv[0]))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=300))
    return rank, world


def cpu_ms():
    """This process's CPU time (all threads), in milliseconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1000.0
