"""``ToolEnv``: a multi-turn harness where the model calls typed Python tools.

The model speaks; if it asked for tool calls, the environment runs them and answers with one
``tool`` message per call; the episode ends when the model answers without tool calls (or a
limit is hit). Everything that can go wrong with a call is the model's error, told to the
model as the tool message, never a crash of the episode: an unknown tool, arguments that are
not JSON, arguments that fail the signature's validation, a tool that raises, a tool that
runs past ``tool_timeout_s``.

Per-episode state: ``setup_state(task)`` builds the episode's dict (e.g. a copy of a database
from ``task.info``); a tool parameter annotated ``verigym.tools.State`` receives it. That is
the only injection mechanism. Keep the state JSON-serialisable: it is stored in the trajectory.

A sync tool runs in a worker thread and its timeout counts from when a thread picks it up (a
busy pool is not the model's fault); a timed-out thread cannot be killed and runs to its end
in the background, so long-running sync tools should bound themselves.

Tool variations: ``tool_variant=SEED`` (or ``apply_tool_variant(seed)``) offers a seeded
variant of the tools (renamed functions and arguments, reworded descriptions, another order,
distractor tools; see ``verigym.tools.variants``); ``with_tool_variant(env, seed)`` applies one
to an already-built environment. The ``oracle_policy()`` and ``null_policy()``
a subclass defines are then wrapped so they still speak the original names: their calls are
mapped through the variant.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from abc import ABC
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from verigym.envs.base import MultiTurnEnv
from verigym.rubric import Rubric
from verigym.tools import Tool, ToolArgumentError
from verigym.tools.variants import ToolVariant, make_variant
from verigym.types import Message, ToolCall, Trajectory

if TYPE_CHECKING:
    from verigym.policies.base import Policy

__all__ = ["ToolEnv", "with_tool_variant"]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class ToolEnv(MultiTurnEnv, ABC):
    """A ``MultiTurnEnv`` whose environment turns are the results of the model's tool calls.

    ``tools`` are ``Tool`` objects or annotated functions (wrapped with ``Tool.from_function``).
    ``tool_timeout_s`` bounds each call; ``max_tool_output_chars`` truncates long results;
    ``parallel_tool_calls`` runs the calls of one turn concurrently (default: in order, which is
    what tools sharing state usually need). Subclasses implement ``tasks`` and set a rubric.
    """

    def __init__(
        self,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        *,
        rubric: Rubric | None = None,
        system_prompt: str | None = None,
        max_turns: int = 10,
        max_total_tokens: int | None = None,
        timeout_s: float | None = None,
        tool_timeout_s: float | None = 30.0,
        max_tool_output_chars: int | None = 20_000,
        parallel_tool_calls: bool = False,
        tool_variant: int | None = None,
    ) -> None:
        super().__init__(
            rubric=rubric,
            system_prompt=system_prompt,
            max_turns=max_turns,
            max_total_tokens=max_total_tokens,
            timeout_s=timeout_s,
        )
        self.tools: tuple[Tool, ...] = tuple(Tool.from_function(t) for t in tools)
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique, got {names}")
        self.tool_timeout_s = tool_timeout_s
        self.max_tool_output_chars = max_tool_output_chars
        self.parallel_tool_calls = parallel_tool_calls
        self.base_tools: tuple[Tool, ...] = self.tools
        self.tool_variant: ToolVariant | None = None
        if tool_variant is not None:
            self.apply_tool_variant(tool_variant)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for attr in ("oracle_policy", "null_policy"):
            method = cls.__dict__.get(attr)
            if method is not None and not getattr(method, "_variant_wrapped", False):
                setattr(cls, attr, _through_variant(method))

    def apply_tool_variant(self, seed: int | None) -> None:
        """Offer the variant of the original tools drawn from ``seed`` (None: the originals again)."""
        if isinstance(seed, bool) or not (seed is None or isinstance(seed, int)):
            raise ValueError(f"tool_variant must be an integer seed, got {seed!r}")
        if seed is None:
            self.tools, self.tool_variant = self.base_tools, None
            return
        self.tool_variant = make_variant(self.base_tools, seed)
        self.tools = self.tool_variant.tools

    def tool_schemas(self) -> list[dict[str, Any]] | None:
        return [t.schema() for t in self.tools] or None

    def tool(self, name: str) -> Tool | None:
        """The tool called ``name`` (None when there is none)."""
        return next((t for t in self.tools if t.name == name), None)

    async def done(self, trajectory: Trajectory, state: dict[str, Any]) -> bool:
        """Over when the model's last turn asked for no tool call."""
        last = trajectory.turns[-1] if trajectory.turns else None
        if last is None or last.source != "model":
            return False
        return not any(m.tool_calls for m in last.messages)

    async def respond(self, trajectory: Trajectory, state: dict[str, Any]) -> list[Message]:
        """One ``tool`` message per tool call of the model's last turn, in the order they were asked."""
        calls = [c for m in trajectory.turns[-1].messages for c in m.tool_calls]
        if self.parallel_tool_calls:
            outputs = list(await asyncio.gather(*(self.run_call(c, state) for c in calls)))
        else:
            outputs = [await self.run_call(c, state) for c in calls]
        return [
            Message(role="tool", content=out, tool_call_id=c.id, name=c.name)
            for c, out in zip(calls, outputs, strict=True)
        ]

    async def run_call(self, call: ToolCall, state: dict[str, Any]) -> str:
        """Run one call and return what the model sees: the result, or ``Error: ...`` saying what went wrong."""
        found = self.tool(call.name)
        if found is None:
            known = ", ".join(t.name for t in self.tools) or "none"
            return f"Error: unknown tool {call.name!r}. Available tools: {known}."
        try:
            arguments = call.parsed_arguments()
        except ValueError as exc:
            return f"Error: {exc}"
        try:
            output = await found.call(arguments, state, timeout=self.tool_timeout_s)
        except ToolArgumentError as exc:
            return f"Error: {exc}"
        except TimeoutError:
            return f"Error: tool {call.name!r} timed out after {self.tool_timeout_s}s"
        except Exception as exc:  # the tool's failure is information for the model, not a crash
            return f"Error: tool {call.name!r} raised {_describe(exc)}"
        limit = self.max_tool_output_chars
        if limit is not None and len(output) > limit:
            output = output[:limit] + f"\n...[truncated {len(output) - limit} characters]"
        return output


def _through_variant(method: Callable[[Any], Policy | None]) -> Callable[[Any], Policy | None]:
    """Wrap a subclass's ``oracle_policy``/``null_policy`` so it plays the env's tool variant."""

    @functools.wraps(method)
    def wrapped(self: ToolEnv) -> Policy | None:
        policy = method(self)
        variant = getattr(self, "tool_variant", None)
        return policy if policy is None or variant is None else variant.policy(policy)

    wrapped._variant_wrapped = True  # type: ignore[attr-defined]
    return wrapped


def with_tool_variant(env: ToolEnv, seed: int | None) -> ToolEnv:
    """A shallow copy of ``env`` offering the variant of its tools drawn from ``seed`` (None: ``env``).

    Its ``oracle_policy()`` and ``null_policy()`` are mapped through the variant.
    """
    if seed is None:
        return env
    clone = copy.copy(env)
    clone.apply_tool_variant(seed)
    return clone
