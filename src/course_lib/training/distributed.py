"""DistributedDataParallel helpers: one process per device, started by `torchrun`.

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT for each process; the
engine only needs to know its rank, how many processes there are, and how to average a number.
Without torchrun, everything here degrades to a single process and costs nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistributedContext:
    """Where this process sits in the job: rank 0 logs and writes checkpoints."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def context() -> DistributedContext:
    """The current process group's context (single process if none is initialised)."""
    if dist.is_available() and dist.is_initialized():
        local = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
        return DistributedContext(dist.get_rank(), dist.get_world_size(), local)
    return DistributedContext()


def init_from_env(device_type: str = "cpu") -> DistributedContext:
    """Join the process group torchrun describes in the environment; no-op without torchrun.

    gloo on CPU (works everywhere), NCCL on GPUs (GPU-to-GPU transfers); each process uses the
    GPU matching its LOCAL_RANK. On GPUs gloo still carries the engine's small CPU tensors (the
    step's target counts, losses and clock), which NCCL cannot.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1 or not dist.is_available():
        return DistributedContext()
    if not dist.is_initialized():
        backend = "cpu:gloo,cuda:nccl" if device_type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
    ctx = context()
    if device_type == "cuda":
        torch.cuda.set_device(ctx.local_rank)
    return ctx


def shutdown() -> None:
    """Leave the process group (call once at the end of a torchrun job)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce(value: torch.Tensor, op: dist.ReduceOp.RedOpType) -> torch.Tensor:
    """`value` reduced with `op` over all processes, in a copy (the value itself in a single
    process): the one collective that the mean, sum and maximum below share."""
    if not context().enabled:
        return value
    value = value.detach().clone()
    dist.all_reduce(value, op=op)
    return value


def all_reduce_mean(value: torch.Tensor) -> torch.Tensor:
    """The mean of `value` over all processes (the value itself in a single process)."""
    ctx = context()
    return all_reduce(value, dist.ReduceOp.SUM) / ctx.world_size if ctx.enabled else value


def all_reduce_sum(value: torch.Tensor) -> torch.Tensor:
    """The sum of `value` over all processes."""
    return all_reduce(value, dist.ReduceOp.SUM)


def barrier() -> None:
    """Wait until every process gets here (e.g. rank 0 finished writing a checkpoint)."""
    if context().enabled:
        dist.barrier()


def micro_batch_slots(rank: int, world_size: int, accumulation_steps: int) -> list[int]:
    """Which micro-batches of each optimizer step this rank computes: a rank-strided slice.

    A step's global batch is cut into world_size * accumulation_steps micro-batches, numbered
    0, 1, ...; rank r takes r, r + world_size, ... So 2 processes x 1 micro-batch and 1 process
    x 2 micro-batches compute exactly the same micro-batches (with the same masking seeds), and
    their averaged gradients match.
    """
    return [rank + world_size * m for m in range(accumulation_steps)]


def all_reduce_max(value: torch.Tensor) -> torch.Tensor:
    """The element-wise maximum of `value` over all processes (used to agree on stopping)."""
    return all_reduce(value, dist.ReduceOp.MAX)
