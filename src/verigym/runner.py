"""The one rollout engine under ``eval``, ``train`` and ``select``.

``run_rollouts`` runs ``samples_per_task`` episodes of every task with bounded concurrency,
scores them with the environment's rubric and hands each finished ``Record`` to a callback
(the eval store appends it to ``results.jsonl``; the CLI advances its progress bar). It never
prints. ``rollout_group`` runs and scores all samples of one task together, for callers (the RL
trainer) that schedule their own groups.

Seeds are per sample: ``sample_seed(seed, task_id, sample_index)`` is a stable hash, so sample
``i`` of task ``t`` gets the same seed whatever the concurrency, the order of completion, or
whether the run was resumed.

Errors are not zeros: an environment that raises (``SystemExit`` included: ``sys.exit`` in env
code fails its sample, with the reason) or a rubric that cannot score yields a record with ``error``
set and no reward. ``KeyboardInterrupt`` is Ctrl-C wherever it lands, and stops the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import NamedTuple

from verigym.envs.base import Environment
from verigym.policies.base import Policy
from verigym.types import ErrorInfo, Record, Sampling, Score, Task, Trajectory, _trusted

__all__ = ["Scored", "record_error", "rollout_group", "run_rollouts", "sample_seed", "tuned_gc"]


class Scored(NamedTuple):
    """One scored sample: unpacks as ``trajectory, score``."""

    trajectory: Trajectory
    score: Score


def sample_seed(seed: int | None, task_id: str, sample_index: int) -> int | None:
    """The sampling seed of sample ``sample_index`` of ``task_id`` (None when ``seed`` is None).

    A 31-bit hash of the three, so it fits every server's seed field and does not depend on
    the order in which samples run.
    """
    if seed is None:
        return None
    digest = hashlib.blake2b(f"{seed}\x1f{task_id}\x1f{sample_index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


@contextlib.contextmanager
def tuned_gc(young: int = 10_000) -> Iterator[None]:
    """For a long run in a command-line process: take the objects alive now (imported modules, a
    loaded model, the tasks) out of the cyclic garbage collector and collect young objects less
    often; both are restored on exit.

    Python's collector otherwise rescans every long-lived object again and again while rollouts
    allocate; on ``benchmarks/eval_overhead.py`` this raised eval throughput by about a third.
    Records are acyclic, so reference counting still frees them at once. Library code does not
    call this; the CLI does, around its event loop.
    """
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(young, old[1], max(old[2], 1000))
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


_RECORD_FIELDS = (
    "env",
    "model",
    "task_id",
    "sample_index",
    "sampling",
    "trajectory",
    "score",
    "usage",
    "wall_s",
    "error",
)
if tuple(Record.model_fields) != _RECORD_FIELDS:  # pragma: no cover  # emit() gives every field
    raise ImportError("verigym.runner: Record's fields changed; update emit() in run_rollouts")


def _sampling_for(sampling: Sampling, task_id: str, index: int) -> Sampling:
    seed = sample_seed(sampling.seed, task_id, index)
    if seed == sampling.seed and sampling.n == 1:
        return sampling
    return _trusted(Sampling, {**sampling.__dict__, "seed": seed, "n": 1})


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r}): environment code called sys.exit"
    return f"{type(exc).__name__}: {exc}"


async def _rollout_one(
    env: Environment, policy: Policy, task: Task, index: int, sampling: Sampling
) -> Trajectory:
    start = time.perf_counter()
    try:
        trajectory = await env.rollout(task, policy, sampling)
    except (Exception, SystemExit) as exc:  # a harness that does not catch its own failure
        # SystemExit too: environment code that calls sys.exit on one sample fails that sample (with
        # its reason), it does not end the run; a resumed run would only meet it again. Ctrl-C
        # (KeyboardInterrupt) still stops the run, resumably.
        trajectory = Trajectory(
            task_id=task.id,
            prompt=list(task.prompt),
            stop_reason="error",
            error=ErrorInfo(kind="environment", message=_describe(exc)),
            started_at=time.time(),
            wall_s=time.perf_counter() - start,
        )
    trajectory.sample_index = index
    return trajectory


async def _score(env: Environment, task: Task, trajectories: Sequence[Trajectory]) -> list[Score]:
    try:
        return await env.rubric.score_group(task, trajectories)
    except (Exception, SystemExit) as exc:  # a misconfigured rubric (e.g. a gate cycle): every sample errors
        reason = f"rubric failed: {_describe(exc)}"
        return [Score(grades={}, error=reason) for _ in trajectories]


async def rollout_group(
    env: Environment,
    policy: Policy,
    task: Task,
    *,
    samples: int,
    sampling: Sampling,
    first_index: int = 0,
) -> list[Scored]:
    """Run ``samples`` episodes of ``task`` concurrently and score them as one group.

    Sample ``i`` (numbered from ``first_index``) uses seed ``sample_seed(sampling.seed, task.id, i)``.
    Group graders see every sample together.
    """
    indices = range(first_index, first_index + samples)
    trajectories = list(
        await asyncio.gather(
            *(_rollout_one(env, policy, task, i, _sampling_for(sampling, task.id, i)) for i in indices)
        )
    )
    scores = await _score(env, task, trajectories)
    return [Scored(t, s) for t, s in zip(trajectories, scores, strict=True)]


def record_error(trajectory: Trajectory, score: Score) -> ErrorInfo | None:
    """The error of a sample: the trajectory's own, else the rubric's (kind ``grader``)."""
    if trajectory.error is not None:
        return trajectory.error
    if score.error is not None:
        return ErrorInfo(kind="grader", message=score.error)
    return None


async def run_rollouts(
    env: Environment,
    policy: Policy,
    tasks: Sequence[Task],
    *,
    samples_per_task: int,
    sampling: Sampling,
    concurrency: int,
    skip: Collection[tuple[str, int]] = frozenset(),
    on_record: Callable[[Record], None] | None = None,
    env_name: str,
    model_name: str,
    keep_records: bool = True,
) -> list[Record]:
    """Run and score ``samples_per_task`` samples of each task, at most ``concurrency`` at a time.

    ``skip`` holds ``(task_id, sample_index)`` pairs already done (a resumed run). ``on_record``
    is called with each record as soon as it is scored — per sample when the rubric has no group
    graders, per task otherwise. Returns the records in task order, then sample order (nothing
    when ``keep_records`` is False: a caller that streams them to disk need not hold them all).
    If ``on_record`` raises, or the caller is cancelled, every running rollout is cancelled.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    grouped = env.rubric.has_group_graders
    work: list[tuple[int, Task, int]] = []
    expected: dict[int, int] = {}
    for pos, task in enumerate(tasks):
        todo = [i for i in range(samples_per_task) if (task.id, i) not in skip]
        expected[pos] = len(todo)
        work.extend((pos, task, i) for i in todo)
    items = iter(work)
    done: list[tuple[int, int, Record]] = []
    groups: dict[int, list[tuple[Trajectory, Sampling, float]]] = {}

    def emit(
        pos: int, task: Task, trajectory: Trajectory, score: Score, sampled: Sampling, t0: float
    ) -> None:
        record = _trusted(
            Record,
            {
                "env": env_name,
                "model": model_name,
                "task_id": task.id,
                "sample_index": trajectory.sample_index,
                "sampling": sampled,
                "trajectory": trajectory,
                "score": score,
                "usage": trajectory.usage,
                "wall_s": time.perf_counter() - t0,
                "error": record_error(trajectory, score),
            },
        )
        if keep_records:
            done.append((pos, trajectory.sample_index, record))
        if on_record is not None:
            on_record(record)

    async def worker() -> None:
        for pos, task, index in items:
            t0 = time.perf_counter()
            sampled = _sampling_for(sampling, task.id, index)
            trajectory = await _rollout_one(env, policy, task, index, sampled)
            if not grouped:
                (score,) = await _score(env, task, (trajectory,))
                emit(pos, task, trajectory, score, sampled, t0)
                continue
            group = groups.setdefault(pos, [])
            group.append((trajectory, sampled, t0))
            if len(group) == expected[pos]:
                group.sort(key=lambda g: g[0].sample_index)
                scores = await _score(env, task, [g[0] for g in group])
                for (traj, samp, start), score in zip(group, scores, strict=True):
                    emit(pos, task, traj, score, samp, start)
                del groups[pos]

    workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, max(len(work), 1)))]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    done.sort(key=lambda d: (d[0], d[1]))
    return [d[2] for d in done]
