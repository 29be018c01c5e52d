"""``verigym train`` with the ``[scale]`` section: pick the trainer and wire samplers, Ray and torchrun.

``run_scaled_train(cfg)`` is ``verigym.train.pipeline.run_train`` plus, as the config asks:
``AsyncRLTrainer`` (``scale.max_staleness``, or remote servers), a ``RemoteSampler``
(``scale.servers``), a ``RayPool`` (``scale.ray``) and data parallelism when started by ``torchrun``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from verigym.scale.async_loop import AsyncRLTrainer
from verigym.scale.ddp import DistContext, init_distributed, is_torchrun, use_torchrun
from verigym.train.config import TrainConfig
from verigym.train.rl import Progress, RLTrainer

__all__ = ["run_scaled_train", "wants_scale"]


class _Follower:
    """The sampler of a torchrun rank > 0: rank 0 generates and broadcasts, so nothing to do here."""

    def __init__(self, trainer: RLTrainer) -> None:
        self._trainer = trainer

    @property
    def policy(self) -> Any:
        return self._trainer.policy

    @property
    def version(self) -> int:
        return int(self._trainer.policy.version)

    async def start(self, model: Any, tokenizer: Any, version: int) -> None:
        return None

    async def publish(self, model: Any, version: int) -> None:
        return None

    async def advance(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


def wants_scale(cfg: TrainConfig) -> bool:
    """Whether anything in ``[scale]`` (or torchrun) asks for more than the one-process loop."""
    sc = cfg.scale
    return sc.max_staleness is not None or bool(sc.servers) or sc.ray or is_torchrun()


def run_scaled_train(
    cfg: TrainConfig, *, resume: str | Path | None = None, progress: Progress | None = None
) -> dict[str, Any]:
    """Train as ``[scale]`` says; returns the summary (rank 0's under torchrun)."""
    from verigym.train.pipeline import run_train

    sc = cfg.scale
    ctx: DistContext | None = init_distributed(sc.parallel) if is_torchrun() else None
    if ctx is not None:
        update: dict[str, Any] = {}
        if ctx.rank:
            update["out_dir"] = str(Path(cfg.out_dir) / f"rank{ctx.rank}")
            progress = None
        if ctx.device != "cpu":
            update["model"] = cfg.model.model_copy(update={"device": ctx.device})
        cfg = cfg.model_copy(update=update)
    use_async = sc.max_staleness is not None or bool(sc.servers)
    pools: list[Any] = []

    leader = ctx is None or ctx.rank == 0

    def wire(trainer: RLTrainer) -> None:
        if isinstance(trainer, AsyncRLTrainer):
            if not leader:
                trainer.sampler = _Follower(trainer)
            elif sc.servers:
                from verigym.scale.remote import API_KEY_ENV, RemoteSampler

                trainer.sampler = RemoteSampler(
                    sc.servers,
                    push_dir=trainer.out_dir / "push",
                    served_name=sc.served_name,
                    weights=sc.weight_push,
                    retries=sc.push_retries,
                    api_key=os.environ.get(API_KEY_ENV) or None,  # never in the config or run files
                )
        if sc.ray and leader:
            from verigym.scale.ray_backend import use_ray

            pools.append(
                use_ray(
                    trainer,
                    address=sc.ray_address,
                    workers=sc.ray_workers,
                    max_inflight=sc.ray_max_inflight,
                )
            )
        if ctx is not None:
            use_torchrun(trainer, ctx)

    try:
        return run_train(
            cfg,
            resume=resume,
            progress=progress,
            on_trainer=wire,
            trainer_cls=AsyncRLTrainer if use_async else RLTrainer,
        )
    finally:
        for pool in pools:
            pool.shutdown()
        if ctx is not None:
            import torch.distributed as dist

            dist.destroy_process_group()
