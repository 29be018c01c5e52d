"""Ray for rollouts and CPU-heavy graders (``--ray [ADDRESS]``).

``RayPool`` starts ``workers`` Ray actors; each builds the environments itself from their registry
name and arguments (nothing unpicklable crosses the wire: tasks, trajectories and scores are
pydantic values). Two ways to use them, chosen by where the policy lives:

- **Graders on Ray** (the policy is in this process, e.g. the trainer's own model): episodes run
  here, where the model is, and each group's rubric (code sandbox, sympy, judges) runs on an actor.
- **Episodes on Ray** (the policy is a set of OpenAI-compatible servers): each episode — harness,
  tools, sandbox — runs on an actor that talks to the servers itself, then the group is graded on
  an actor; completions carry the policy version as in ``verigym.scale.remote``.

``RayPool.wrap(key, env)`` returns a stand-in environment, so the RL producer, ``rollout_group``
and ``run_rollouts`` use Ray without knowing it.

Back-pressure: at most ``max_inflight`` calls per actor are outstanding; the producer awaits a
free slot before submitting more, so a slow cluster slows generation instead of piling up work.
The per-sample seeds are the caller's, so results equal the in-process run's for the same seed.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any, cast

from verigym.envs.base import Environment
from verigym.policies.base import Policy
from verigym.types import Sampling, Score, Task, Trajectory

__all__ = ["RAY_MISSING", "RayMissingError", "RayPool", "require_ray", "use_ray"]

RAY_MISSING = "--ray needs Ray, which is not installed: pip install 'verigym[ray]'"


class RayMissingError(RuntimeError):
    """Ray is not installed."""


def require_ray() -> Any:
    """The ``ray`` module, or ``RayMissingError`` with the one line to show the user."""
    try:
        import ray
    except ImportError:
        raise RayMissingError(RAY_MISSING) from None
    return ray


class _Worker:
    """The actor body: environments built from (name, args), a policy per server spec."""

    def __init__(self, envs: dict[str, tuple[str, dict[str, Any]]]) -> None:
        from verigym.envs.registry import load_env

        self.envs = {key: load_env(name, **args) for key, (name, args) in envs.items()}
        self.policies: dict[tuple[Any, ...], Any] = {}

    async def score(self, key: str, task: Task, trajectories: list[Trajectory]) -> list[Score]:
        result: list[Score] = await self.envs[key].rubric.score_group(task, trajectories)
        return result

    async def episode(self, key: str, spec: tuple[Any, ...], task: Task, sampling: Sampling) -> Trajectory:
        from verigym.policies.spec import ModelSpec, served_policy
        from verigym.scale.remote import VersionedPolicy

        urls, model, served, mode, version, api_key = spec
        policy = self.policies.get((urls, served, mode))
        if policy is None:
            client = served_policy(ModelSpec(model=model, base_url=list(urls), api_key=api_key))
            policy = VersionedPolicy(client, served)
            policy.mode = mode
            self.policies[(urls, served, mode)] = policy
        policy.inner.model, policy.version = model, version  # set and used before any await
        result: Trajectory = await self.envs[key].rollout(task, policy, sampling)
        return result


class _RemoteRubric:
    """Stands in for an environment's rubric: ``score_group`` runs on a Ray actor."""

    def __init__(self, pool: RayPool, key: str, local: Any) -> None:
        self._pool, self._key, self._local = pool, key, local

    def __getattr__(self, name: str) -> Any:
        return getattr(self._local, name)

    async def score(self, task: Task, trajectory: Trajectory) -> Score:
        return (await self.score_group(task, [trajectory]))[0]

    async def score_group(self, task: Task, trajectories: Sequence[Trajectory]) -> list[Score]:
        result: list[Score] = await self._pool.call("score", self._key, task, list(trajectories))
        return result


class _OnRay:
    """An environment whose graders run on Ray, and whose episodes do too when the policy is a set
    of servers the actors can reach (a ``VersionedPolicy``); a policy in this process stays here."""

    def __init__(self, env: Environment, pool: RayPool, key: str) -> None:
        self._env, self._pool, self._key = env, pool, key
        self.rubric = _RemoteRubric(pool, key, env.rubric)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    async def rollout(self, task: Task, policy: Policy, sampling: Sampling) -> Trajectory:
        from verigym.scale.remote import VersionedPolicy

        if isinstance(policy, VersionedPolicy):
            p = policy
            spec = (
                tuple(p.inner.base_urls),
                p.inner.model,
                p.served_name,
                p.mode,
                p.version,
                p.inner.api_key,
            )
            result: Trajectory = await self._pool.call("episode", self._key, spec, task, sampling)
            return result
        return await self._env.rollout(task, policy, sampling)


class RayPool:
    """``workers`` Ray actors holding the named environments (module doc).

    ``envs`` maps a key to ``(registry name, kwargs)``. ``address`` None starts a local Ray
    instance (``num_cpus`` bounds it); an address joins a cluster (``"auto"``: the one this
    machine belongs to).
    """

    def __init__(
        self,
        envs: dict[str, tuple[str, dict[str, Any]]],
        *,
        address: str | None = None,
        workers: int = 2,
        max_inflight: int = 8,
        num_cpus: int | None = None,
    ) -> None:
        ray = require_ray()
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                kwargs["address"] = address
            elif num_cpus:
                kwargs["num_cpus"] = num_cpus
            ray.init(**kwargs)
        actor = ray.remote(num_cpus=1)(_Worker)
        self.actors = [actor.remote(envs) for _ in range(max(1, workers))]
        self.max_inflight = max_inflight
        self._load = [0] * len(self.actors)
        self._capacity: asyncio.Semaphore | None = None
        self._loop: Any = None
        self._turn = itertools.count()
        self.calls = 0

    async def call(self, method: str, *args: Any) -> Any:
        """Run ``method`` on the least-loaded actor; waits while every actor has ``max_inflight``."""
        loop = asyncio.get_running_loop()
        if self._capacity is None or self._loop is not loop:  # a semaphore belongs to one event loop
            self._capacity = asyncio.Semaphore(self.max_inflight * len(self.actors))
            self._loop = loop
        async with self._capacity:
            n = len(self.actors)
            first = next(self._turn)
            i = min(((first + j) % n for j in range(n)), key=lambda j: self._load[j])
            self._load[i] += 1
            self.calls += 1
            try:
                return await getattr(self.actors[i], method).remote(*args)
            finally:
                self._load[i] -= 1

    def wrap(self, key: str, env: Environment) -> Environment:
        """``env`` with graders (and, against servers, whole episodes) on the actors."""
        return cast(Environment, _OnRay(env, self, key))  # duck-typed: rollout + rubric, the rest forwarded

    def shutdown(self) -> None:
        ray = require_ray()
        for a in self.actors:
            ray.kill(a)
        self.actors = []


def use_ray(
    trainer: Any,
    *,
    address: str | None = None,
    workers: int = 2,
    max_inflight: int = 8,
    num_cpus: int | None = None,
) -> RayPool:
    """Route an ``RLTrainer``'s training rollouts through a new ``RayPool`` (held-out evaluation
    stays in this process). The environments must be the config's ``[[envs]]``, in order."""
    cfg = trainer.cfg
    names = [name for name, _ in trainer.envs]
    if names != [e.name for e in cfg.envs]:
        raise ValueError("--ray rebuilds the environments on the actors from the config's [[envs]]")
    envs = {f"{i}:{e.name}": (e.name, dict(e.args)) for i, e in enumerate(cfg.envs)}
    pool = RayPool(envs, address=address, workers=workers, max_inflight=max_inflight, num_cpus=num_cpus)
    keys = list(envs)
    for slot in trainer.producer.slots:
        slot.env = pool.wrap(keys[names.index(slot.name)], slot.env)
    return pool
