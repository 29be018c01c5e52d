"""The ``Environment`` base: tasks + harness + rubric, and the multi-turn rollout loop.

Every harness is a ``MultiTurnEnv``: the model speaks, the environment answers
(``respond``) until ``done`` says stop or a limit is hit. ``SingleTurnEnv`` is the case where
the environment never answers. Limits (max turns, max total tokens, wall-clock timeout) each
end the episode with their own stop reason; a failed policy request ends it with
``stop_reason="error"`` and an ``ErrorInfo`` — it is never turned into a wrong answer.

Construction has no side effects: no files are read and no tasks generated until
``tasks()`` is called. During an episode ``episode_task()`` is its task: an oracle policy is handed
its task that way (``envs.procedural.task_oracle``).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from verigym.policies.base import Policy, PolicyError
from verigym.rubric import Rubric
from verigym.types import Completion, ErrorInfo, Message, Sampling, Task, Trajectory, Turn

if TYPE_CHECKING:
    from verigym.graders.families import GraderFamily

__all__ = ["Environment", "MultiTurnEnv", "SingleTurnEnv", "episode_task"]


_EPISODE_TASK: contextvars.ContextVar[Task | None] = contextvars.ContextVar(
    "verigym_episode_task", default=None
)


def episode_task() -> Task | None:
    """The task of the episode being run (``MultiTurnEnv.rollout`` sets it for the episode's calls),
    or None outside an episode. Oracle policies read it instead of looking their task up by prompt."""
    return _EPISODE_TASK.get()


class Environment(ABC):
    """Tasks, a harness and a rubric. Subclasses set ``name``/``description`` and ``rubric``."""

    name: str = "environment"
    description: str = ""
    # arguments a real (pretrained) model gets unless the user set them: the defaults suit the tiny model
    real_model_args: ClassVar[dict[str, Any]] = {}
    # a grader family of the env's own graders that verifier-bench measures through the env
    # (``verigym verifier-bench --grader NAME``; ``envs.registry.load_grader_family``)
    grader_family: ClassVar[GraderFamily | None] = None

    def __init__(self, *, rubric: Rubric | None = None, system_prompt: str | None = None) -> None:
        self.rubric = rubric if rubric is not None else Rubric()
        self.system_prompt = system_prompt

    @abstractmethod
    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        """The first ``n`` tasks of ``split`` under ``seed`` (deterministic)."""

    @abstractmethod
    async def rollout(self, task: Task, policy: Policy, sampling: Sampling) -> Trajectory:
        """Run one episode of ``task`` with ``policy``."""

    def tool_schemas(self) -> list[dict[str, Any]] | None:
        """OpenAI-format schemas of the tools offered to the policy (None: no tools)."""
        return None

    def oracle_policy(self) -> Policy | None:
        """A policy that solves every task from ``Task.info`` (None if the env has none)."""
        return None

    def null_policy(self) -> Policy | None:
        """A policy that does nothing useful; it should score ~0."""
        return None

    def summary_metrics(
        self, tasks: Sequence[Task], scores: Mapping[str, Sequence[tuple[int, float]]]
    ) -> dict[str, Any]:
        """A benchmark's own metrics over an eval run, for ``summary.json``'s ``env_metrics``.

        ``scores`` maps each grader to ``(task position in tasks, score)`` of every scored sample,
        in run order. The default has none ({}: the key is left out); ``ifeval`` gives IFEval's
        prompt- and instruction-level accuracies.
        """
        return {}

    def with_system_prompt(self, messages: Sequence[Message]) -> list[Message]:
        if self.system_prompt and not (messages and messages[0].role == "system"):
            return [Message(role="system", content=self.system_prompt), *messages]
        return list(messages)


class MultiTurnEnv(Environment, ABC):
    """The model and the environment take turns. Override ``respond`` and ``done``.

    ``state`` is a per-episode dict, created by ``setup_state`` and stored in the trajectory
    (keep it JSON-serialisable). Limits: ``max_turns`` model turns, ``max_total_tokens``
    completion tokens over the episode, ``timeout_s`` seconds of wall clock.
    """

    def __init__(
        self,
        *,
        rubric: Rubric | None = None,
        system_prompt: str | None = None,
        max_turns: int = 10,
        max_total_tokens: int | None = None,
        timeout_s: float | None = None,
    ) -> None:
        super().__init__(rubric=rubric, system_prompt=system_prompt)
        self.max_turns = max_turns
        self.max_total_tokens = max_total_tokens
        self.timeout_s = timeout_s

    def setup_state(self, task: Task) -> dict[str, Any]:
        return {}

    @abstractmethod
    async def respond(self, trajectory: Trajectory, state: dict[str, Any]) -> list[Message]:
        """The environment's answer to the model's last turn."""

    async def done(self, trajectory: Trajectory, state: dict[str, Any]) -> bool:
        """Whether the episode is over after the model's last turn."""
        return False

    async def rollout(self, task: Task, policy: Policy, sampling: Sampling) -> Trajectory:
        token = _EPISODE_TASK.set(task)  # what an oracle policy is handed (``episode_task``)
        try:
            return await self._rollout(task, policy, sampling)
        finally:
            _EPISODE_TASK.reset(token)

    async def _rollout(self, task: Task, policy: Policy, sampling: Sampling) -> Trajectory:
        trajectory = Trajectory(
            task_id=task.id, prompt=self.with_system_prompt(task.prompt), started_at=time.time()
        )
        state = self.setup_state(task)
        start = time.perf_counter()
        try:
            if self.timeout_s is None:
                await self._loop(task, policy, sampling, trajectory, state)
            else:
                await asyncio.wait_for(self._loop(task, policy, sampling, trajectory, state), self.timeout_s)
        except TimeoutError:
            trajectory.stop_reason = "timeout"
        except PolicyError as exc:
            trajectory.stop_reason = "error"
            trajectory.error = ErrorInfo(kind=exc.kind, message=str(exc))
        except Exception as exc:  # the environment's own code failed: an error, not a zero
            trajectory.stop_reason = "error"
            trajectory.error = ErrorInfo(kind="environment", message=f"{type(exc).__name__}: {exc}")
        trajectory.wall_s = time.perf_counter() - start
        trajectory.state = state
        return trajectory

    async def _loop(
        self, task: Task, policy: Policy, sampling: Sampling, trajectory: Trajectory, state: dict[str, Any]
    ) -> None:
        tools = self.tool_schemas()
        used = 0
        for _ in range(self.max_turns):
            view, spent = await self.context_for_turn(policy, sampling, trajectory, state)
            used += spent
            budget = sampling
            if self.max_total_tokens is not None:
                left = self.max_total_tokens - used
                if left <= 0:
                    trajectory.stop_reason = "max_tokens"
                    return
                budget = sampling.model_copy(update={"max_tokens": min(sampling.max_tokens, left)})
            completion = await policy.complete(view, tools=tools, sampling=budget)
            used += completion.usage.completion_tokens
            self.record_model_turn(trajectory, completion)
            if await self.done(trajectory, state):
                trajectory.stop_reason = "length" if completion.finish_reason == "length" else "done"
                return
            reply = await self.respond(trajectory, state)
            trajectory.turns.append(Turn(source="env", messages=reply))
            if await self.done(trajectory, state):
                trajectory.stop_reason = "done"
                return
        trajectory.stop_reason = "max_turns"

    async def context_for_turn(
        self, policy: Policy, sampling: Sampling, trajectory: Trajectory, state: dict[str, Any]
    ) -> tuple[list[Message], int]:
        """The messages the policy sees this turn, and completion tokens spent making them.

        The whole conversation by default; a context manager such as ReSum overrides it.
        """
        return trajectory.messages, 0

    @staticmethod
    def record_model_turn(trajectory: Trajectory, completion: Completion) -> None:
        trajectory.turns.append(
            Turn(source="model", messages=[completion.as_message()], completion=completion)
        )


class SingleTurnEnv(MultiTurnEnv, ABC):
    """One prompt, one answer."""

    def __init__(
        self,
        *,
        rubric: Rubric | None = None,
        system_prompt: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        super().__init__(rubric=rubric, system_prompt=system_prompt, max_turns=1, timeout_s=timeout_s)

    async def respond(self, trajectory: Trajectory, state: dict[str, Any]) -> list[Message]:
        return []

    async def done(self, trajectory: Trajectory, state: dict[str, Any]) -> bool:
        return True
