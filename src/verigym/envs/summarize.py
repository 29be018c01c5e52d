"""Context summarization for long multi-turn episodes (ReSum).

ReSum (Wu et al. 2025, "ReSum: Unlocking Long-Horizon Search Intelligence via Context
Summarization", arXiv:2509.13313): when the conversation grows past a token budget, the history
since the task prompt is condensed into a summary, and the agent continues from *(prompt,
summary)* instead of the full transcript. ``ReSumEnv(env, max_context_tokens=...)`` wraps any
``MultiTurnEnv`` (``ToolEnv`` included) this way::

    env = ReSumEnv(load_env("search", level=4), max_context_tokens=1500, summarizer=judge_policy)

From the command line: ``verigym eval verigym.envs.summarize:resum --env-arg env=search
--env-arg max_context_tokens=1500`` (other ``--env-arg`` go to the wrapped environment).

What the policy is shown before each model turn: the (system +) task prompt, then the messages
of the turns since the latest summary. When that context counts more than
``max_context_tokens`` (``count_tokens``; default ~4 characters per token) and at least one
turn happened since the latest summary, the summarizer policy is asked (``SUMMARY_PROMPT``)
to condense the context, and a ``Turn(source="summary")`` holding one ``user`` message with the
summary is appended to the trajectory. Nothing is deleted: the trajectory keeps every turn, the
summaries included, and ``trajectory.state["resum"]`` lists when each summary was made.

Loss masks. A trainer learns from the turns that carry a ``Completion`` (model turns). The
summary turn carries the summarizer's completion **only when the summarizer is the rollout
policy itself** (``summarizer=None``): then the summary is model-written text produced from the
summarization prompt and is trained like any model turn. A summary written by another policy
carries no completion, so it is environment text (mask 0) in the prompts of the turns after it,
never trained on. Each turn's prompt token ids are what the policy was actually shown, so a
model turn after a summary simply starts a new training row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from verigym.envs.base import Environment, MultiTurnEnv
from verigym.policies.base import Policy
from verigym.types import Message, Sampling, Task, Trajectory, Turn

__all__ = ["SUMMARY_PROMPT", "ReSumEnv", "approx_tokens", "resum"]

SUMMARY_PROMPT = (
    "The conversation is getting long. Write a concise summary of the progress so far: what the "
    "task is, every fact found (names, ids, numbers, file names, results of tool calls) and what "
    "remains to be done. Do not call tools. Reply with the summary only."
)
SUMMARY_HEADER = "Summary of the earlier conversation (older turns were condensed):"


def approx_tokens(messages: Sequence[Message]) -> int:
    """A tokenizer-free estimate: about 4 characters per token, plus a few per message."""
    chars = sum(len(m.content) + sum(len(c.name) + len(c.arguments) for c in m.tool_calls) for m in messages)
    return chars // 4 + 4 * len(messages)


class ReSumEnv(MultiTurnEnv):
    """``env`` with ReSum context summarization (see the module docstring)."""

    def __init__(
        self,
        env: MultiTurnEnv,
        *,
        max_context_tokens: int = 4096,
        summarizer: Policy | None = None,
        summary_max_tokens: int = 512,
        count_tokens: Callable[[Sequence[Message]], int] = approx_tokens,
        summary_prompt: str = SUMMARY_PROMPT,
    ) -> None:
        if not isinstance(env, MultiTurnEnv):
            raise ValueError(f"ReSumEnv needs a multi-turn environment, got {type(env).__name__}")
        if max_context_tokens < 1:
            raise ValueError(f"max_context_tokens must be ≥ 1, got {max_context_tokens}")
        super().__init__(
            rubric=env.rubric,
            system_prompt=env.system_prompt,
            max_turns=env.max_turns,
            max_total_tokens=env.max_total_tokens,
            timeout_s=env.timeout_s,
        )
        self.inner = env
        self.name = f"{env.name}+resum"
        self.description = f"{env.description} (with ReSum context summarization)".strip()
        self.max_context_tokens = max_context_tokens
        self.summarizer = summarizer
        self.summary_max_tokens = summary_max_tokens
        self.count_tokens = count_tokens
        self.summary_prompt = summary_prompt
        self.public_info_keys = tuple(getattr(env, "public_info_keys", ()))

    # -- delegation -----------------------------------------------------------------------------
    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return self.inner.tasks(n, seed=seed, split=split)

    def tool_schemas(self) -> list[dict[str, Any]] | None:
        return self.inner.tool_schemas()

    def oracle_policy(self) -> Policy | None:
        return self.inner.oracle_policy()

    def null_policy(self) -> Policy | None:
        return self.inner.null_policy()

    def setup_state(self, task: Task) -> dict[str, Any]:
        return self.inner.setup_state(task)

    async def respond(self, trajectory: Trajectory, state: dict[str, Any]) -> list[Message]:
        return await self.inner.respond(trajectory, state)

    async def done(self, trajectory: Trajectory, state: dict[str, Any]) -> bool:
        return await self.inner.done(trajectory, state)

    # -- the context ----------------------------------------------------------------------------
    @staticmethod
    def context(trajectory: Trajectory) -> list[Message]:
        """What the policy is shown: the prompt, then the turns since the latest summary."""
        start = 0
        for i, turn in enumerate(trajectory.turns):
            if turn.source == "summary":
                start = i
        out = list(trajectory.prompt)
        for turn in trajectory.turns[start:]:
            out.extend(turn.messages)
        return out

    async def _summarize(
        self, policy: Policy, sampling: Sampling, trajectory: Trajectory, state: dict[str, Any], size: int
    ) -> int:
        writer = self.summarizer or policy
        ask = [*self.context(trajectory), Message(role="user", content=self.summary_prompt)]
        budget = sampling.model_copy(update={"max_tokens": self.summary_max_tokens})
        completion = await writer.complete(ask, tools=None, sampling=budget)
        own = self.summarizer is None
        text = f"{SUMMARY_HEADER}\n{completion.text.strip()}"
        trajectory.turns.append(
            Turn(
                source="summary",
                messages=[Message(role="user", content=text)],
                completion=completion if own else None,
            )
        )
        state.setdefault("resum", []).append(
            {"turn": len(trajectory.turns) - 1, "context_tokens": size, "by_rollout_policy": own}
        )
        return completion.usage.completion_tokens if own else 0

    async def context_for_turn(
        self, policy: Policy, sampling: Sampling, trajectory: Trajectory, state: dict[str, Any]
    ) -> tuple[list[Message], int]:
        view = self.context(trajectory)
        size = self.count_tokens(view)
        since = len(view) - len(trajectory.prompt)
        fresh = since > 0 and not (since == 1 and trajectory.turns[-1].source == "summary")
        if size > self.max_context_tokens and fresh:
            spent = await self._summarize(policy, sampling, trajectory, state, size)
            return self.context(trajectory), spent
        return view, 0


def resum(
    env: str,
    max_context_tokens: int = 4096,
    summary_max_tokens: int = 512,
    summarizer_base_url: str | None = None,
    summarizer_model: str | None = None,
    summarizer_api_key_env: str | None = None,
    **env_args: Any,
) -> Environment:
    """Registry-facing factory: ``ReSumEnv(load_env(env, **env_args), ...)``; the summarizer is the
    rollout policy unless ``summarizer_base_url`` names an OpenAI-compatible server (its key in the
    variable ``summarizer_api_key_env``, read as ``verigym.policies.ModelSpec`` reads keys)."""
    from verigym.envs.registry import EnvArgError, load_env
    from verigym.policies.spec import MissingApiKey, ModelSpec, make_policy

    inner = load_env(env, **env_args)
    if not isinstance(inner, MultiTurnEnv):
        raise EnvArgError(f"resum: environment {env!r} is not multi-turn")
    summarizer: Policy | None = None
    if summarizer_base_url is not None:
        spec = ModelSpec(
            model=summarizer_model, base_url=[summarizer_base_url], api_key_env=summarizer_api_key_env
        )
        try:
            summarizer = make_policy(spec)
        except MissingApiKey as exc:
            raise EnvArgError(f"resum: {exc.worded('summarizer_api_key_env')}") from None
    return ReSumEnv(
        inner,
        max_context_tokens=max_context_tokens,
        summarizer=summarizer,
        summary_max_tokens=summary_max_tokens,
    )
