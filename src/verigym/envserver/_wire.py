"""The env-server's wire shapes (``docs/envserver.md``): a client's step as a ``Completion``, an episode's
turn or end as OpenEnv's ``{observation, reward, done}``, the score as a grader vector.

Everything that leaves the server about a task goes through here; a trajectory's ``state`` (which may hold
a copy of hidden data) and ``Task.info`` never do, and grade ``detail`` strings (which can quote the answer)
only when the server shares them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from verigym.envserver._catalog import FieldError, TaskRef
from verigym.envserver._episode import End, Turn, end_error
from verigym.types import Completion, Message, Score, ToolCall, Usage

__all__ = ["MAX_DEPTH", "check_depth", "observation", "parse_action", "score_payload"]

MAX_DEPTH = 64  # the deepest nesting of lists and objects a body may have (as ``verigym serve``)
_MAX_TEXT = 1 << 22
_FINISH = ("stop", "length", "tool_calls", "content_filter")


def check_depth(value: Any, where: str = "body") -> None:
    """Refuse nesting deeper than ``MAX_DEPTH`` (walked without recursion, so no depth crashes it)."""
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise FieldError(f"{where} is nested more than {MAX_DEPTH} levels deep")
            todo.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))


def _text(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        raise FieldError(
            f"action.{name} must be a string of at most {_MAX_TEXT} characters, got {type(value).__name__}"
        )
    return value


def _tool_calls(value: Any) -> tuple[ToolCall, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise FieldError(f"action.tool_calls must be a list of OpenAI tool calls, got {type(value).__name__}")
    calls = []
    for i, item in enumerate(value):
        fn = item.get("function") if isinstance(item, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise FieldError(
                f"action.tool_calls[{i}] must be {{'id', 'type': 'function', 'function': {{'name', 'arguments'}}}}"
            )
        arguments = fn.get("arguments", "{}")
        if isinstance(arguments, dict):  # a parsed object: its JSON text, as a model would have written it
            arguments = json.dumps(arguments)
        if not isinstance(arguments, str):
            raise FieldError(f"action.tool_calls[{i}].function.arguments must be a JSON string")
        call_id = item.get("id") or f"call-{i}"
        if not isinstance(call_id, str):
            raise FieldError(f"action.tool_calls[{i}].id must be a string")
        calls.append(ToolCall(id=call_id, name=fn["name"], arguments=arguments))
    return tuple(calls)


def _usage(value: Any) -> Usage:
    if value is None:
        return Usage()
    if not isinstance(value, dict):
        raise FieldError("action.usage must be {'prompt_tokens': int, 'completion_tokens': int}")
    out = {}
    for name in ("prompt_tokens", "completion_tokens"):
        n = value.get(name, 0)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise FieldError(f"action.usage.{name} must be a non-negative integer, got {n!r}")
        out[name] = n
    return Usage(**out)


def parse_action(data: Any) -> Completion:
    """A client's step (the model's assistant message) as the ``Completion`` the harness is handed.

    ``{"content", "tool_calls", "finish_reason", "usage"}``, or openenv's MCP-style
    ``{"type": "call_tool", "tool_name", "arguments"}`` (one turn with that one call).
    """
    if not isinstance(data, dict):
        raise FieldError(f"action must be a JSON object, got {type(data).__name__}")
    if data.get("type") == "call_tool":
        name, arguments = data.get("tool_name"), data.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise FieldError("action.tool_name must be the name of a tool")
        if not isinstance(arguments, dict):
            raise FieldError("action.arguments must be a JSON object")
        call = ToolCall(id="call-0", name=name, arguments=json.dumps(arguments))
        return Completion(tool_calls=(call,), finish_reason="tool_calls")
    unknown = set(data) - {"content", "tool_calls", "finish_reason", "usage", "role", "metadata", "type"}
    if unknown:
        raise FieldError(
            f"action has unknown field(s) {sorted(unknown)}: expected content, tool_calls, finish_reason, usage"
        )
    finish = data.get("finish_reason", "stop")
    if finish not in _FINISH:
        raise FieldError(f"action.finish_reason must be one of {', '.join(_FINISH)}, got {finish!r}")
    return Completion(
        text=_text(data, "content"),
        tool_calls=_tool_calls(data.get("tool_calls")),
        finish_reason=finish,
        usage=_usage(data.get("usage")),
    )


def _number(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def score_payload(score: Score, details: bool) -> dict[str, Any]:
    """The grader vector: each grade's score (null when it errored) and error; ``detail`` when shared."""
    grades: dict[str, Any] = {}
    for name, grade in score.grades.items():
        entry: dict[str, Any] = {"score": _number(grade.score), "error": grade.error}
        if details:
            entry["detail"] = grade.detail
        grades[name] = entry
    return {"reward": _number(score.reward), "grades": grades, "error": score.error}


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [m.to_openai() for m in messages]


def _reply(before: Sequence[Message] | None, step: Completion | None, event: Turn | End) -> list[Message]:
    """The environment's messages answering the last step."""
    if step is None:
        return []
    if isinstance(event, End):
        turns = event.trajectory.turns
        last_model = max((i for i, t in enumerate(turns) if t.source == "model"), default=-1)
        return [m for t in turns[last_model + 1 :] if t.source == "env" for m in t.messages]
    head = [*(before or []), step.as_message()]
    now = event.messages
    return list(now[len(head) :]) if now[: len(head)] == head else []


def observation(
    *,
    session_id: str,
    ref: TaskRef,
    task_id: str,
    event: Turn | End,
    before: Sequence[Message] | None,
    step: Completion | None,
    turn: int,
    tools: list[dict[str, Any]] | None,
    details: bool,
) -> dict[str, Any]:
    """OpenEnv's ``{"observation", "reward", "done"}`` for ``event`` (``before``: the view the last
    ``step`` answered)."""
    reply = _reply(before, step, event)
    obs: dict[str, Any] = {
        "session_id": session_id,
        "env": ref.env,
        "task_id": task_id,
        "split": ref.split,
        "seed": ref.seed,
        "index": ref.index,
        "reply": _messages(reply),
        "tools": tools,
        "turn": turn,
    }
    if step is not None and len(step.tool_calls) == 1 and not step.text:
        obs["tool_name"] = step.tool_calls[0].name
        obs["result"] = "\n".join(m.content for m in reply if m.role == "tool")
    if isinstance(event, Turn):
        obs["messages"] = _messages(event.messages)
        obs["tools"] = event.tools
        obs["sampling"] = event.sampling.model_dump(mode="json")
        return {"observation": obs, "reward": None, "done": False}
    error = end_error(event)
    obs["messages"] = _messages(event.trajectory.messages)
    obs["stop_reason"] = event.trajectory.stop_reason
    obs["score"] = score_payload(event.score, details)
    obs["error"] = None if error is None else {"kind": error.kind, "message": error.message}
    reward = None if error is not None else _number(event.score.reward)
    return {"observation": obs, "reward": reward, "done": True}
