"""Multi-process training with ``torch.distributed``: ``torchrun --nproc-per-node N -m verigym train``.

Data parallelism over the policy update (gloo on CPU, NCCL on GPU):

- Rank 0 produces each step's batch (rollouts, grading, advantages' inputs) and broadcasts it, so
  every rank computes the same advantages and the same minibatch order as one process would.
- Within each optimizer step the micro-batches are split across ranks; each rank backpropagates
  its share with the loss normalisers of the *whole* minibatch (global token and sequence counts),
  then the gradients are summed across ranks (one bucketed all-reduce, the DDP reduction) before
  clipping and the optimizer step. The update therefore equals a single-process step on the same
  global batch up to float summation order (the test checks the parameters after one step).
- ``strategy="zero"`` (the FSDP-style memory option) also shards the AdamW state across ranks with
  ``ZeroRedundancyOptimizer`` (ZeRO stage 1; Rajbhandari et al. 2020, arXiv:1910.02054).

Only rank 0 writes the run directory; rank r > 0 writes into ``out_dir/rank{r}``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

__all__ = ["DistContext", "init_distributed", "is_torchrun", "use_torchrun"]

Strategy = Literal["ddp", "zero"]


def is_torchrun() -> bool:
    """Whether this process was started by ``torchrun`` with more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


@dataclass
class DistContext:
    """This process's place in the job, and the collectives the update needs."""

    rank: int
    world: int
    device: str
    strategy: Strategy = "ddp"
    grads_group: Any = None  # the update's collectives (the consumer's thread)
    batch_group: Any = None  # batch broadcasts (the producer's side), so the two never interleave
    extra: dict[str, Any] = field(default_factory=dict)

    def shard(self, chunks: list[list[int]]) -> list[list[int]]:
        """This rank's micro-batches: the minibatch's rows re-split into a multiple of ``world`` parts."""
        flat = [i for c in chunks for i in c]
        parts = -(-max(len(chunks), self.world) // self.world) * self.world
        size = -(-len(flat) // parts) if flat else 0
        split = [flat[i * size : (i + 1) * size] for i in range(parts)] if size else []
        return [c for c in split[self.rank :: self.world] if c]

    def sync_grads(self, model: Any) -> None:
        """Sum the gradients of the trainable parameters across ranks (missing grads count as 0)."""
        import torch.distributed as dist

        params = [p for p in model.parameters() if p.requires_grad]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.grads_group)
        at = 0
        for p in params:
            n = p.numel()
            p.grad = flat[at : at + n].view_as(p).clone()
            at += n

    def reduce_metrics(self, sums: dict[str, float], tokens: float) -> tuple[dict[str, float], float]:
        """The update's metric sums and token count over all ranks (``ratio_max``: the max)."""
        import torch.distributed as dist

        gathered: list[Any] = [None] * self.world
        dist.all_gather_object(gathered, (sums, tokens), group=self.grads_group)
        out: dict[str, float] = {}
        for part, _ in gathered:
            for k, v in part.items():
                out[k] = max(out.get(k, v), v) if k == "ratio_max" else out.get(k, 0.0) + v
        return out, float(sum(t for _, t in gathered))


def init_distributed(strategy: Strategy = "ddp") -> DistContext:
    """Join the ``torchrun`` job (env:// rendezvous): NCCL with one GPU per process, else gloo."""
    import torch.distributed as dist

    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = "cpu"
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    ctx = DistContext(rank, world, device, strategy)
    ctx.grads_group = dist.new_group(backend="gloo") if device == "cpu" else dist.new_group()
    ctx.batch_group = dist.new_group(backend="gloo")  # pickled batches travel on CPU
    return ctx


def use_torchrun(trainer: Any, ctx: DistContext) -> None:
    """Make an ``RLTrainer`` (or ``AsyncRLTrainer``) one data-parallel rank of ``ctx``'s job."""
    import torch.distributed as dist

    with torch.no_grad():  # start from rank 0's weights, whatever each process built
        for p in trainer.model.parameters():
            dist.broadcast(p.data, src=0, group=ctx.grads_group)
    trainer.state.extra["dist"] = ctx
    if ctx.strategy == "zero":
        _shard_optimizer(trainer)
    produce = trainer.producer.produce

    async def broadcast_batch(step: int) -> Any:
        box: list[Any] = [await produce(step)] if ctx.rank == 0 else [None]
        await asyncio.to_thread(dist.broadcast_object_list, box, 0, ctx.batch_group)
        return box[0]

    trainer.producer.produce = broadcast_batch
    save = trainer.save

    def save_on_rank0() -> Any:
        opt = trainer.state.optimizer
        if hasattr(opt, "consolidate_state_dict"):  # ZeRO: every rank hands its shard to rank 0
            opt.consolidate_state_dict(to=0)
        return save() if ctx.rank == 0 else trainer.out_dir

    trainer.save = save_on_rank0
    if ctx.rank != 0:
        trainer.progress = None


def _shard_optimizer(trainer: Any) -> None:
    from torch.distributed.optim import ZeroRedundancyOptimizer

    from verigym.train.rl import make_scheduler

    rl = trainer.cfg.rl
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    optimizer = ZeroRedundancyOptimizer(
        params, optimizer_class=torch.optim.AdamW, lr=rl.lr, weight_decay=rl.weight_decay
    )
    total = rl.steps * rl.num_iterations * rl.minibatches
    trainer.state.optimizer = optimizer
    trainer.state.scheduler = make_scheduler(optimizer, rl.lr_schedule, rl.warmup_steps, total)
