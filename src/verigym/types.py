"""The nouns every part of verigym shares: messages, tasks, sampling, completions,
trajectories, grades, scores and the one results record.

All are pydantic models that round-trip through JSON (``model_dump_json`` /
``model_validate_json``). Value types are frozen; ``Trajectory`` is built turn by turn by a
harness and so stays mutable until it is scored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

_M = TypeVar("_M", bound=BaseModel)

__all__ = [
    "Completion",
    "ErrorInfo",
    "Grade",
    "Message",
    "Record",
    "Role",
    "Sampling",
    "Score",
    "StopReason",
    "Task",
    "ToolCall",
    "Trajectory",
    "Turn",
    "Usage",
]

Role = Literal["system", "user", "assistant", "tool"]
StopReason = Literal[
    "done",  # the harness ended the episode normally
    "max_turns",
    "max_tokens",  # the episode's total token budget ran out
    "length",  # the model's last completion was truncated by max_tokens
    "timeout",  # wall-clock limit of the episode
    "error",  # an infrastructure error (policy request failed, environment crashed)
    "truncated",  # an agent program failed; its valid prefix is kept (``on_error = "truncate"``)
]


_set = object.__setattr__


def _trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """A model from values the caller already holds as the right types (every field given): what
    ``model_construct`` does, without its per-field Python loop. For hot paths that would otherwise
    only re-validate their own objects (``runner``'s records, ``LocalPolicy``'s completions)."""
    model = cls.__new__(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", set(values))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Frozen):
    """A call the model asked for. ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ``ValueError`` with the reason if they are not a JSON object."""
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments of {self.name!r} are not valid JSON: {exc.msg}") from None
        if not isinstance(value, dict):
            raise ValueError(f"arguments of {self.name!r} must be a JSON object, got {type(value).__name__}")
        return value


class Message(_Frozen):
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """The message in the OpenAI chat format."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out

    @classmethod
    def from_openai(cls, m: Mapping[str, Any]) -> Message | None:
        """A message in the OpenAI chat format as a ``Message``; None when it holds what a ``Message``
        cannot (content parts other than text, fields beyond role/content/tool_calls/tool_call_id/name)."""
        if set(m) - {"role", "content", "tool_calls", "tool_call_id", "name", "refusal"}:
            return None
        content = m.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, Mapping) and p.get("type") == "text" for p in content):
                return None
            content = "".join(str(p.get("text", "")) for p in content)
        calls = []
        for t in m.get("tool_calls") or ():
            fn = t.get("function") if isinstance(t, Mapping) else None
            if not isinstance(fn, Mapping):
                return None
            calls.append(
                ToolCall(
                    id=str(t.get("id", "")),
                    name=str(fn.get("name", "")),
                    arguments=str(fn.get("arguments", "")),
                )
            )
        try:
            return cls(
                role=m.get("role"),  # type: ignore[arg-type]
                content=str(content or ""),
                tool_calls=tuple(calls),
                tool_call_id=m.get("tool_call_id"),
                name=m.get("name"),
            )
        except ValueError:
            return None


class Task(_Frozen):
    """One problem. ``info`` is hidden data for graders and oracles; it never reaches the policy."""

    id: str
    prompt: tuple[Message, ...]
    answer: str | None = None
    info: dict[str, Any] = Field(default_factory=dict)


class Sampling(_Frozen):
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_tokens: int = 512
    n: int = 1
    stop: tuple[str, ...] = ()
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    # Structured outputs, as OpenAI spells them (enforced by a grammar in the local engine, passed on to
    # a server): ``{"type": "json_object"}`` / ``{"type": "json_schema", "json_schema": {...}}``, and
    # ``"auto" | "none" | "required" | {"type": "function", "function": {"name": ...}}``.
    # (left out of a record while unset, so the logs of runs that use none of them stay as they were)
    response_format: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    tool_choice: str | dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    parallel_tool_calls: bool = Field(default=True, exclude_if=lambda v: v is True)


class Usage(_Frozen):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class Completion(_Frozen):
    """What a policy returned for one sample.

    ``token_ids_exact`` is True only when ``completion_token_ids`` are the ids the model actually
    sampled (a local model, or a server that returns them). A server that does not is not
    re-tokenized behind the user's back: the ids stay ``None`` and the flag False.
    ``top_logprobs`` holds, per completion token, the top-k logprobs in descending order.
    """

    # A logprob of -inf (a token the model gave no mass) is written as the string "-Infinity".
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    prompt_token_ids: tuple[int, ...] | None = None
    completion_token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    top_logprobs: tuple[tuple[float, ...], ...] | None = None
    token_ids_exact: bool = False
    usage: Usage = Usage()
    model: str = ""
    policy_version: int | None = None
    # optional response fields the server sent malformed, ignored here (e.g. "usage",
    # "choices[0].logprobs"): the answer is kept, the missing data is visible. ``"tool_call"`` once per
    # tool-call block the parser could not read (left in ``text``; see ``policies.local._toolformats``)
    malformed: tuple[str, ...] = ()
    # the grammar the sample was drawn under ("json_object", "json_schema", "tool_call"; None: none): its
    # ids and logprobs are those of the constrained distribution (``policies.local._grammar``)
    constrained: str | None = Field(default=None, exclude_if=lambda v: v is None)

    def as_message(self) -> Message:
        return Message(role="assistant", content=self.text, tool_calls=self.tool_calls)


class ErrorInfo(_Frozen):
    """An error with a kind (``policy``, ``timeout``, ``grader``, ``environment``...) and a reason."""

    kind: str
    message: str


class Turn(BaseModel):
    """One step of an episode: a model completion, or what the environment answered."""

    model_config = ConfigDict(extra="forbid")

    # "branch": an agent program's call that does not extend its main conversation (a sub-agent, a
    # compaction, an auxiliary call); "answer": the program's final answer where it differs from the
    # model's last text (no completion). Graders of the main conversation read "model" and "env" turns.
    source: Literal["model", "env", "summary", "branch", "answer"]
    messages: list[Message]
    completion: Completion | None = None


class Trajectory(BaseModel):
    """Everything that happened in one episode of one task."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    sample_index: int = 0
    prompt: list[Message]
    turns: list[Turn] = Field(default_factory=list)
    stop_reason: StopReason = "done"
    error: ErrorInfo | None = None
    started_at: float = 0.0
    wall_s: float = 0.0
    state: dict[str, Any] = Field(default_factory=dict)

    @property
    def messages(self) -> list[Message]:
        """The whole conversation: prompt, then every turn's messages (an agent program's ``branch`` calls,
        a sub-agent's or a compaction's, are not part of it)."""
        out = list(self.prompt)
        for turn in self.turns:
            if turn.source != "branch":
                out.extend(turn.messages)
        return out

    @property
    def completions(self) -> list[Completion]:
        return [t.completion for t in self.turns if t.completion is not None]

    @property
    def final_text(self) -> str:
        """The text of the last assistant message ('' when the model never answered)."""
        for msg in reversed(self.messages):
            if msg.role == "assistant":
                return msg.content
        return ""

    @property
    def prefix_breaks(self) -> tuple[int, int]:
        """(turn pairs, breaks): of the model turns after the first, how many got a prompt that does not
        extend the ids the model saw and produced before (a template that re-renders history, e.g. one
        that strips earlier reasoning). Only turns with exact token ids count. A break costs training one
        more row (``train.samples``), never a wrong id."""
        pairs = breaks = 0
        seen: list[int] | None = None
        for c in self.completions:
            if c.prompt_token_ids is None or c.completion_token_ids is None or not c.token_ids_exact:
                seen = None
                continue
            prompt = list(c.prompt_token_ids)
            if seen is not None:
                pairs += 1
                breaks += prompt[: len(seen)] != seen
            seen = prompt + list(c.completion_token_ids)
        return pairs, breaks

    @property
    def usage(self) -> Usage:
        """Token counts summed over every completion."""
        completions = self.completions
        if len(completions) == 1:
            return completions[0].usage
        return Usage(
            prompt_tokens=sum(c.usage.prompt_tokens for c in completions),
            completion_tokens=sum(c.usage.completion_tokens for c in completions),
        )


class Grade(_Frozen):
    """One grader's verdict. ``error`` set means the grader could not judge; ``score`` is then NaN."""

    score: float
    detail: str = ""
    error: str | None = None

    @field_validator("score", mode="before")
    @classmethod
    def _null_is_nan(cls, value: Any) -> Any:
        # JSON has no NaN: an errored grade's NaN score is written as null and read back as NaN.
        return math.nan if value is None else value

    @classmethod
    def failed(cls, reason: str) -> Grade:
        return cls(score=math.nan, error=reason)

    @property
    def ok(self) -> bool:
        return self.error is None


class Score(_Frozen):
    """The grader vector, the weighted reward and errors kept apart from zeros.

    ``reward`` is None exactly when ``error`` is set: an errored sample has no reward.
    """

    grades: dict[str, Grade] = Field(default_factory=dict)
    reward: float | None = None
    error: str | None = None
    penalty: float = 0.0


class Record(BaseModel):
    """One line of ``results.jsonl``: one ``(task_id, sample_index)``."""

    model_config = ConfigDict(extra="forbid")

    env: str
    model: str
    task_id: str
    sample_index: int
    sampling: Sampling
    trajectory: Trajectory
    score: Score
    usage: Usage
    wall_s: float
    error: ErrorInfo | None = None
