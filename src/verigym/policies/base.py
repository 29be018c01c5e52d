"""The ``Policy`` protocol: anything that turns messages into a ``Completion``.

A policy is async and stateless from the caller's view. ``complete`` returns one sample;
``sample`` returns ``sampling.n`` samples, using the policy's own ``complete_n`` where it has
one (a server's ``n``, a local model's batched generation) and concurrent ``complete`` calls
with per-sample seeds otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, Protocol, TypedDict, Unpack, runtime_checkable

from verigym.types import Completion, Message, Sampling

__all__ = ["BatchedPolicy", "ModelSpecError", "Policy", "PolicyArgs", "PolicyError", "sample"]


class PolicyError(Exception):
    """A request to a policy failed for a reason that is not the model's output.

    ``retryable`` says whether repeating the same request may succeed (429, 5xx, timeouts).
    """

    def __init__(self, kind: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable


class ModelSpecError(ValueError):
    """A model that cannot be opened as its spec says: ``field`` (``model``, ``dtype``, ``device``,
    ``tool_format``) names the setting, ``value`` what it was, ``problem`` what is wrong (one line)."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"{value}: {problem}" if value is not None else problem)

    def worded(self, flags: Mapping[str, str] | str = "--") -> str:
        """The message naming the caller's setting for the field: ``flags`` maps a field to its
        name (``{"model": "MODEL_PATH"}``); a string is a prefix (``--``, ``--judge-``) to
        ``--field-name``; unmapped fields get the ``--`` prefix."""
        if isinstance(flags, str):
            name = flags + self.field.replace("_", "-")
        else:
            name = flags.get(self.field, "--" + self.field.replace("_", "-"))
        return f"{name} {self.value}: {self.problem}" if self.value is not None else f"{name}: {self.problem}"


@runtime_checkable
class Policy(Protocol):
    """``async complete(messages, *, tools=None, sampling) -> Completion``.

    ``tools`` are OpenAI-format function schemas (``Tool.schema()``).
    """

    @property
    def name(self) -> str: ...

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        sampling: Sampling,
    ) -> Completion: ...


class PolicyArgs(TypedDict):
    """The keyword arguments of ``Policy.complete`` (and ``complete_n``)."""

    tools: NotRequired[Sequence[dict[str, Any]] | None]
    sampling: Sampling


class BatchedPolicy:
    """A base for a policy that samples ``sampling.n`` completions natively (a server's ``n``, one
    batched local pass): ``complete`` is ``complete_n``'s one-sample case."""

    async def complete(self, messages: Sequence[Message], **kw: Unpack[PolicyArgs]) -> Completion:
        """One completion (``sampling.n`` is ignored; use ``complete_n`` for several)."""
        sampling = kw["sampling"]
        one = sampling if sampling.n == 1 else sampling.model_copy(update={"n": 1})
        return (await self.complete_n(messages, tools=kw.get("tools"), sampling=one))[0]

    async def complete_n(self, messages: Sequence[Message], **kw: Unpack[PolicyArgs]) -> list[Completion]:
        """``sampling.n`` completions for one prompt."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release what the policy holds (clients, sessions); nothing by default. Every policy of
        verigym's has ``aclose``, so a caller closes any policy the same way."""


async def sample(
    policy: Policy,
    messages: Sequence[Message],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    sampling: Sampling,
) -> list[Completion]:
    """``sampling.n`` completions for one prompt."""
    many = getattr(policy, "complete_n", None)
    if many is not None:
        result: list[Completion] = await many(messages, tools=tools, sampling=sampling)
        return result
    one = sampling.model_copy(update={"n": 1})
    seeds = [None if sampling.seed is None else sampling.seed + i for i in range(sampling.n)]
    return list(
        await asyncio.gather(
            *(
                policy.complete(messages, tools=tools, sampling=one.model_copy(update={"seed": s}))
                for s in seeds
            )
        )
    )
