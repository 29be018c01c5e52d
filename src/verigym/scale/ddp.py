"""Multi-process training with ``torch.distributed``: ``torchrun --nproc-per-node N -m verigym train``.

Data parallelism over the policy update (gloo on CPU, NCCL on GPU):

- Rank 0 produces each step's batch (rollouts, grading, advantages' inputs) and broadcasts it, so
  every rank computes the same advantages and the same minibatch order as one process would.
- Within each optimizer step the micro-batches are split across ranks; each rank backpropagates
  its share with the loss normalisers of the *whole* minibatch (global token and sequence counts),
  then the gradients are summed across ranks (one bucketed all-reduce, the DDP reduction) before
  clipping and the optimizer step. The update therefore equals a single-process step on the same
  global batch up to float summation order (the test checks the parameters after one step).
- ``strategy="fsdp"`` runs the update on a copy of the model sharded with FSDP2 (``fully_shard``
  per transformer block): parameters, gradients and AdamW state are split across ranks, each block is
  all-gathered for its forward and backward and its gradients reduce-scattered (summed, not
  averaged). Every rank runs the same number of micro-batches (an empty share runs with weight 0),
  since each forward is a collective. After the update the full weights are gathered back into
  ``trainer.model``, which generation, evaluation and saving use unchanged; so each rank still holds
  one full copy of the weights, but not of the gradients or the optimizer state.

Only rank 0 writes the run directory; rank r > 0 writes into ``out_dir/rank{r}``.
"""

from __future__ import annotations

import asyncio
import copy
import os
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

__all__ = ["DistContext", "init_distributed", "is_torchrun", "use_torchrun"]

Strategy = Literal["ddp", "fsdp"]


def is_torchrun() -> bool:
    """Whether this process was started by ``torchrun`` with more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


@dataclass
class DistContext:
    """This process's place in the job, and the collectives the update needs (it is the update's
    ``verigym.train.DataParallel`` hook, set as the trainer's ``state.dist``)."""

    rank: int
    world: int
    device: str
    strategy: Strategy = "ddp"
    grads_group: Any = None  # the update's collectives (the consumer's thread)
    batch_group: Any = None  # batch broadcasts (the producer's side), so the two never interleave
    sharded: Any = None  # fsdp: the FSDP2-sharded copy of the model the update trains
    extra: dict[str, Any] = field(default_factory=dict)

    def shard(self, chunks: list[list[int]]) -> list[list[int]]:
        """This rank's micro-batches: the minibatch's rows re-split into a multiple of ``world`` parts."""
        flat = [i for c in chunks for i in c]
        parts = -(-max(len(chunks), self.world) // self.world) * self.world
        size = -(-len(flat) // parts) if flat else 0
        split = [flat[i * size : (i + 1) * size] for i in range(parts)] if size else []
        return [c for c in split[self.rank :: self.world] if c or self.sharded is not None]

    def module(self, model: Any) -> Any:
        """The module the update trains: the sharded copy under fsdp, else ``model`` itself."""
        return model if self.sharded is None else self.sharded

    def finish(self, model: Any) -> None:
        """fsdp: gather the updated weights of the sharded copy into ``model`` (a collective)."""
        if self.sharded is None:
            return
        full = dict(self.sharded.named_parameters())
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.requires_grad:
                    p.copy_(full[name].full_tensor())

    def sync_grads(self, model: Any) -> None:
        """Sum the gradients of the trainable parameters across ranks (missing grads count as 0)."""
        import torch.distributed as dist

        if self.sharded is not None:
            return  # FSDP reduce-scattered them during backward

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
    trainer.state.dist = ctx  # the update's data-parallel hook (train's UpdateState.dist)
    if ctx.strategy == "fsdp":
        _shard_model(trainer, ctx)
    produce = trainer.producer.produce

    async def broadcast_batch(step: int) -> Any:
        box: list[Any] = [await produce(step)] if ctx.rank == 0 else [None]
        await asyncio.to_thread(dist.broadcast_object_list, box, 0, ctx.batch_group)
        return box[0]

    trainer.producer.produce = broadcast_batch
    save = trainer.save

    def save_on_rank0() -> Any:
        return save() if ctx.rank == 0 else trainer.out_dir

    trainer.save = save_on_rank0
    if ctx.rank != 0:
        trainer.progress = None


def _shard_model(trainer: Any, ctx: DistContext) -> None:
    """FSDP2: shard a copy of the model per transformer block, and train it with a fresh AdamW."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    from verigym.train.optim import make_optimizer

    sharded = copy.deepcopy(trainer.model)
    mesh = DeviceMesh.from_group(ctx.grads_group, ctx.device.split(":")[0])
    blocks = {n for m in sharded.modules() for n in getattr(m, "_no_split_modules", None) or []}
    for m in list(sharded.modules())[1:]:
        if type(m).__name__ in blocks:
            fully_shard(m, mesh=mesh)
    fully_shard(sharded, mesh=mesh)
    for m in sharded.modules():
        if isinstance(m, FSDPModule):
            m.set_gradient_divide_factor(1.0)  # the loss already uses the global normalisers: sum
            m.set_force_sum_reduction_for_comms(True)  # plain SUM (gloo has no PREMUL_SUM)
    ctx.sharded = sharded
    rl = trainer.cfg.rl
    total = rl.steps * rl.num_iterations * rl.minibatches
    trainer.state.optimizer, trainer.state.scheduler = make_optimizer(sharded.parameters(), rl, total)
