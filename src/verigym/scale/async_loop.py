"""Asynchronous off-policy RL: rollouts for steps k+1..k+d are generated while step k trains.

``AsyncRLTrainer`` is ``verigym.train.rl.RLTrainer`` with three changes:

1. The producer samples from a ``Sampler`` (a private in-process copy of the model, or remote
   OpenAI-compatible servers) instead of the trainer's own model, and may run up to
   ``max_staleness`` = d steps ahead: d + 1 tickets instead of one. Generation of step k starts
   once step k − d − 1 has been trained and published, so every sample trained at step k comes
   from a policy at most d versions old.
2. The update runs on a worker thread, so the event loop keeps generating meanwhile; after it the
   new weights are published to the sampler, which switches to them at its next step boundary.
3. Before the update every sample's staleness (trainer version − the version that produced it,
   read from ``Completion.policy_version``) is measured and stale samples are importance-corrected
   (``verigym.scale.correction``). A sample whose version is unknown is dropped, never trained on.

With d = 0 the loop is the synchronous one step for step (the test checks the metrics are equal).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Unpack

from verigym.scale.correction import Correction, correct_rows, staleness_metrics
from verigym.scale.sampler import InProcessSampler, Sampler
from verigym.train import Group, Sample, StepBatch
from verigym.train.config import TrainConfig
from verigym.train.rl import RLTrainer, TrainerArgs

__all__ = ["AsyncRLTrainer", "sample_version"]


def sample_version(sample: Sample) -> int | None:
    """The oldest policy version among a sample's completions (None if any is unknown)."""
    versions = [c.policy_version for c in sample.scored.trajectory.completions]
    if not versions or any(v is None for v in versions):
        return None
    return min(int(v) for v in versions if v is not None)


class AsyncRLTrainer(RLTrainer):
    """``RLTrainer`` with generation up to ``max_staleness`` steps ahead of training (module doc)."""

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        max_staleness: int | None = None,
        correction: Correction | None = None,
        sampler: Sampler | None = None,
        **parts: Unpack[TrainerArgs],
    ) -> None:
        super().__init__(cfg, **parts)
        sc = cfg.scale
        if max_staleness is None:
            max_staleness = sc.max_staleness or 0
        if max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0, got {max_staleness}")
        self.max_staleness = max_staleness
        self.correction = correction or Correction(sc.tis_cap, sc.mask_threshold, sc.correct_fresh)
        self.sampler: Sampler = sampler or InProcessSampler(tool_format=cfg.model.tool_format)

    # ---- the consumer ------------------------------------------------------------------------------

    def consume(self, batch: StepBatch) -> dict[str, Any]:
        """Staleness, importance correction, then the synchronous trainer's advantages + update."""
        version = self.policy.version
        unknown = 0
        groups: list[Group] = []
        for g in batch.groups:
            known = [s for s in g.samples if sample_version(s) is not None]
            unknown += len(g.samples) - len(known)
            if len(known) >= 2:
                groups.append(
                    g if len(known) == len(g.samples) else Group(g.env, g.task, known, g.grader_weights)
                )
        batch.groups = groups
        pairs = [(s.rows, sample_version(s) or 0) for g in groups for s in g.samples]
        extra = staleness_metrics([version - v for _, v in pairs])
        extra.update(
            correct_rows(
                self.model,
                pairs,
                trainer_version=version,
                correction=self.correction,
                pad_id=self.pad_id,
                temperature=self.cfg.sampling.temperature,
            )
        )
        extra["async/samples_unknown_version"] = float(unknown)
        metrics = super().consume(batch)
        metrics.update(extra)
        return metrics

    # ---- the loop ------------------------------------------------------------------------------------

    async def run_async(self) -> list[dict[str, Any]]:
        cfg = self.cfg
        d = self.max_staleness
        log = self.open_log()
        queue: asyncio.Queue[StepBatch | None] = asyncio.Queue()  # the tickets bound it to d + 1
        tickets = asyncio.Semaphore(d + 1)  # generation of step k waits until step k-d-1 is trained
        start = self.step

        async def produce() -> None:
            try:
                for step in range(start, cfg.rl.steps):
                    await tickets.acquire()
                    await self.sampler.advance()
                    batch = await self.producer.produce(step)
                    batch.stats["async/sampler_version"] = float(self.sampler.version)
                    queue.put_nowait(batch)
            finally:
                queue.put_nowait(None)  # on failure too: the consumer stops, then the error surfaces

        async def consume() -> None:
            last = time.perf_counter()
            while True:
                t0 = time.perf_counter()
                batch = await queue.get()
                if batch is None:
                    break
                waited = time.perf_counter() - t0
                before = self.policy.version
                metrics = await asyncio.to_thread(self.consume, batch)
                if self.policy.version != before:
                    await self.sampler.publish(self.model, self.policy.version)
                self.step = batch.step + 1
                now = time.perf_counter()
                metrics.update(
                    {
                        "async/max_staleness": float(d),
                        "async/trainer_wait_s": waited,
                        "async/step_wall_s": now - last,
                    }
                )
                last = now
                await self.finish_step(metrics, log)
                tickets.release()

        producer: asyncio.Task[None] | None = None
        try:
            await self.sampler.start(self.model, self.tokenizer, self.policy.version)
            self.producer.policy = self.sampler.policy
            producer = asyncio.create_task(produce())
            await consume()
            await producer
        finally:
            if producer is not None:
                producer.cancel()
                await asyncio.gather(producer, return_exceptions=True)
            log.close()
            await self.sampler.aclose()
        return self.history
