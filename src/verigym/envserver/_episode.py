"""One episode of one task, driven step by step from outside: the environment's own ``rollout`` runs with a
policy that waits for the client.

``Episode.start()`` runs ``env.rollout(task, policy, sampling)`` in a task; each time the harness asks the
policy for a turn (``WaitingPolicy.complete``) the episode hands the client the messages the policy would
see, the tools and the sampling (a ``Turn``), and waits for ``Episode.step(completion)``. When the harness
ends the episode the environment's rubric scores the trajectory (as ``runner`` does: an environment or
rubric that fails is an error, never a zero) and the episode is ``done`` with its ``Score``.

Nothing of the harness (tool running, limits, stop reasons) or the grading is re-implemented here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.envs.base import Environment
from verigym.runner import record_error
from verigym.types import Completion, ErrorInfo, Message, Sampling, Score, Task, Trajectory

__all__ = ["End", "Episode", "StepError", "Turn", "end_error"]


class StepError(Exception):
    """A step the episode cannot take now (``status``: the HTTP status it maps to)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Turn:
    """The harness asks the policy for a turn: ``messages`` as the policy sees them, ``tools``, ``sampling``."""

    messages: list[Message]
    tools: list[dict[str, Any]] | None
    sampling: Sampling


@dataclass(frozen=True)
class End:
    """The episode is over: its trajectory (kept on the server: its ``state`` may hold hidden data) and score."""

    trajectory: Trajectory
    score: Score


@dataclass
class _Shared:
    """What the policy and the episode hand each other (one of each is pending at a time)."""

    next_event: asyncio.Future[Turn | End] | None = None
    reply: asyncio.Future[Completion] | None = None


class WaitingPolicy:
    """A ``Policy`` whose completions come from the client's steps."""

    name = "envserver-client"

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        sampling: Sampling,
    ) -> Completion:
        reply: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._shared.reply = reply
        event = self._shared.next_event
        if event is not None and not event.done():
            event.set_result(Turn(list(messages), list(tools) if tools is not None else None, sampling))
        return await reply


async def _score(env: Environment, task: Task, trajectory: Trajectory) -> Score:
    try:
        (score,) = await env.rubric.score_group(task, [trajectory])
    except (Exception, SystemExit) as exc:  # a misconfigured rubric: the sample errors (runner's rule)
        return Score(grades={}, error=f"rubric failed: {type(exc).__name__}: {exc}")
    return score


@dataclass
class Episode:
    """One episode of ``task`` on ``env`` (module doc). ``steps`` are the completions taken so far (a fork
    replays them); ``history`` the turn views they answered (a fork checks it reaches the same ones)."""

    env: Environment
    task: Task
    sampling: Sampling
    steps: list[Completion] = field(default_factory=list)
    history: list[list[Message]] = field(default_factory=list)
    current: Turn | End | None = None
    busy: bool = False
    _shared: _Shared = field(default_factory=_Shared)
    _task: asyncio.Task[None] | None = None

    @property
    def done(self) -> bool:
        return isinstance(self.current, End)

    async def start(self) -> Turn | End:
        """Run the harness up to its first request to the policy (or its end)."""
        if self._task is not None:
            raise StepError(409, "this episode has already started")
        event = self._arm()
        self._task = asyncio.get_running_loop().create_task(self._run())
        return await self._await(event)

    async def step(self, completion: Completion) -> Turn | End:
        """Answer the harness's pending turn with ``completion``; run to its next request (or its end)."""
        if self.busy:
            raise StepError(409, "a step of this session is already running; wait for its answer")
        if isinstance(self.current, End):
            raise StepError(409, "the episode is done: reset (or create a new session) to start another")
        reply = self._shared.reply
        if not isinstance(self.current, Turn) or reply is None or reply.done():
            raise StepError(409, "the episode has not started: reset first")
        self.busy = True
        try:
            event = self._arm()
            self.history.append(self.current.messages)
            self.steps.append(completion)
            reply.set_result(completion)
            return await self._await(event)
        finally:
            self.busy = False

    def close(self) -> None:
        """Stop the harness where it is (a session closed or reaped mid-episode)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        event = self._shared.next_event
        if event is not None and not event.done():  # a step waiting on the harness: answer it, not hang
            event.set_exception(StepError(409, "the session was closed while this step ran"))
        reply = self._shared.reply
        if reply is not None and not reply.done():
            reply.cancel()

    def _arm(self) -> asyncio.Future[Turn | End]:
        event: asyncio.Future[Turn | End] = asyncio.get_running_loop().create_future()
        event.add_done_callback(self._record)  # kept even when the step's waiter is cancelled
        self._shared.next_event = event
        return event

    def _record(self, event: asyncio.Future[Turn | End]) -> None:
        if not event.cancelled() and event.exception() is None:
            self.current = event.result()

    async def _await(self, event: asyncio.Future[Turn | End]) -> Turn | End:
        self.current = await asyncio.shield(event)
        return self.current

    async def _run(self) -> None:
        start = time.perf_counter()
        try:
            trajectory = await self.env.rollout(self.task, WaitingPolicy(self._shared), self.sampling)
        except asyncio.CancelledError:
            raise
        except (
            Exception,
            SystemExit,
        ) as exc:  # a harness that does not catch its own failure (runner's rule)
            trajectory = Trajectory(
                task_id=self.task.id,
                prompt=list(self.task.prompt),
                stop_reason="error",
                error=ErrorInfo(kind="environment", message=f"{type(exc).__name__}: {exc}"),
                started_at=time.time(),
                wall_s=time.perf_counter() - start,
            )
        score = await _score(self.env, self.task, trajectory)
        event = self._shared.next_event
        if event is not None and not event.done():
            event.set_result(End(trajectory, score))


def end_error(end: End) -> ErrorInfo | None:
    """The episode's error: the trajectory's own, else the rubric's (``runner.record_error``)."""
    return record_error(end.trajectory, end.score)
