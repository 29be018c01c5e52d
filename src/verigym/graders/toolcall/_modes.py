"""Tool-call graders: BFCL-style AST match, tau-bench-style final state, required outputs.

- ``toolcall_grader`` matches the calls the model made (every completion's ``tool_calls``, in
  order) against allowed answers in BFCL's ``possible_answer`` form (see ``_ast_match``):
  name, required parameters, no unexpected parameter, types checked to any depth (int accepted
  for float; bool never a number; tuples checked by length and position), allowed value sets,
  optional parameters omitted only where the answer has ``""``, parallel calls matched order-free,
  strings compared casefolded with whitespace collapsed. A call whose arguments are not a JSON
  object is the model's failure (score 0), not a grader error.
- ``final_state_grader`` (Yao et al. 2024, "τ-bench"): replay the gold actions on a fresh copy of
  the environment's state and compare a canonical hash with the state the agent left behind.
- ``required_outputs_grader``: every required output must appear in the agent's replies as a
  whole token (``"10"`` is not found in ``"100"`` nor in ``"10.5"``; ``"1000"`` is found in
  ``"1,000"``), case-insensitively; ``<think>`` reasoning the user never sees does not count.

Task fields read when the grader is not given them: ``info["answers"]`` (a list of answers, or a
list of alternative answer lists), ``info["functions"]`` (BFCL docs or OpenAI tool schemas),
``info["gold_actions"]`` and ``info["outputs"]``. The agent's final state is read from
``trajectory.state[state_key]``.

Suite line format (``tests/suites/toolcall.jsonl``)::

    {"id": str, "label": bool, "kind"?: "ast" | "state" | "outputs",
     # kind=ast (default)
     "calls": [{"name": str, "arguments": {...} | str}], "answers": [...], "functions"?: [...],
     # kind=state: a JSON dict state; actions are {"op": "set"|"delete"|"append"|"inc", "key", "value"?}
     "initial": {...}, "gold_actions": [...], "agent_actions": [...],
     # kind=outputs
     "replies": [str, ...], "outputs": [str, ...]}
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from verigym.graders.families import GraderFamily
from verigym.graders.format import strip_think
from verigym.graders.toolcall._ast_match import (
    STRING_MODES,
    Call,
    MatchResult,
    bfcl_string,
    check_type,
    match_call,
    match_calls,
)
from verigym.rubric import Grader
from verigym.types import Grade, Task, ToolCall, Trajectory

__all__ = [
    "BENCH",
    "STRING_MODES",
    "Call",
    "MatchResult",
    "bench_verdict",
    "bfcl_string",
    "calls_from_trajectory",
    "check_type",
    "contains_output",
    "final_state_grader",
    "match_any",
    "match_call",
    "match_calls",
    "replay_actions",
    "required_outputs_grader",
    "state_hash",
    "toolcall_grader",
]

S = TypeVar("S")
Answers = Sequence[Mapping[str, Mapping[str, Sequence[Any]]]]


def _to_call(call: ToolCall | Mapping[str, Any]) -> Call:
    if isinstance(call, ToolCall):
        return Call(call.name, call.parsed_arguments())
    args = call.get("arguments", {})
    if isinstance(args, str):
        args = ToolCall(id="", name=str(call.get("name", "")), arguments=args).parsed_arguments()
    if not isinstance(args, Mapping):
        raise ValueError(f"arguments of {call.get('name')!r} must be an object")
    return Call(str(call.get("name", "")), args)


def calls_from_trajectory(trajectory: Trajectory) -> list[Call]:
    """Every tool call of every completion, in order; ``ValueError`` for malformed arguments."""
    return [_to_call(tc) for c in trajectory.completions for tc in c.tool_calls]


def _function_docs(functions: Sequence[Mapping[str, Any]] | None) -> list[Mapping[str, Any]] | None:
    if functions is None:
        return None
    # OpenAI tool schemas wrap the function: {"type": "function", "function": {...}}
    return [f["function"] if "function" in f and isinstance(f["function"], Mapping) else f for f in functions]


def _is_map(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # dict first: the ABC check is slow


def _alternatives(answers: Any) -> list[list[Any]]:
    if not isinstance(answers, list | tuple):
        raise ValueError(f"answers must be a list, got {type(answers).__name__}")
    alts: list[list[Any]] = (
        [list(a) for a in answers]
        if answers and all(isinstance(a, list | tuple) for a in answers)
        else [list(answers)]
    )
    for alt in alts:
        for ans in alt:
            ok = _is_map(ans) and len(ans) == 1 and _is_map(next(iter(ans.values())))
            if not ok:
                raise ValueError(
                    f"each answer must be {{function_name: {{param: [allowed, ...]}}}}, got {ans!r}"
                )
            for param, options in next(iter(ans.values())).items():
                if not isinstance(options, list | tuple):
                    raise ValueError(f"allowed values of {param!r} must be a list, got {options!r}")
    return alts


def match_any(
    calls: Sequence[Call],
    answers: Any,
    functions: Sequence[Mapping[str, Any]] | None = None,
    *,
    ordered: bool = False,
    strings: str = "strict",
) -> MatchResult:
    """Match ``calls`` against one answer list or any of several alternative answer lists.

    ``strings="bfcl"`` compares strings as BFCL does (punctuation, spaces and case ignored)."""
    docs = _function_docs(functions)
    first: MatchResult | None = None
    for alt in _alternatives(answers):
        res = match_calls(calls, alt, docs, ordered=ordered, strings=strings)
        if res.ok:
            return res
        first = first or res
    return first or MatchResult(False, "no answers")


def toolcall_grader(
    answers: Any = None,
    functions: Sequence[Mapping[str, Any]] | None = None,
    *,
    ordered: bool = False,
    strings: str = "strict",
    weight: float = 1.0,
    name: str = "toolcall",
) -> Grader:
    """1 when the model's calls match the allowed answers (AST match), else 0 with the reason.

    ``answers=None`` reads ``task.info["answers"]``; ``functions=None`` reads
    ``task.info["functions"]`` (or ``"tools"``) when present. ``answers=[]`` means "no call".
    ``strings``: ``"strict"`` (casefold and whitespace only) or ``"bfcl"`` (BFCL's documented
    normalisation: spaces and ``, . / - _ * ^`` ignored, so "Seattle WA" matches "Seattle, WA";
    with BFCL's type rules too, e.g. a variable-reference string allowed for an array, see
    ``_ast_match``).
    """
    if strings not in STRING_MODES:
        raise ValueError(f"strings must be one of {STRING_MODES}, got {strings!r}")

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        gold = answers if answers is not None else task.info.get("answers")
        if gold is None:
            raise ValueError(f"task {task.id!r} has no info['answers'] for the tool-call grader")
        docs = functions if functions is not None else task.info.get("functions", task.info.get("tools"))
        try:
            calls = calls_from_trajectory(trajectory)
        except ValueError as exc:
            return Grade(score=0.0, detail=f"malformed call: {exc}")
        res = match_any(calls, gold, docs, ordered=ordered, strings=strings)
        return Grade(score=float(res.ok), detail="match" if res.ok else res.reason)

    return Grader(grade, weight=weight, name=name)


def _canonical(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return _canonical(value.model_dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _canonical(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((_canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value == 0.0:
        return 0.0  # -0.0 and 0.0 are the same state
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"state holds a {type(value).__name__}, which has no canonical form")


def state_hash(state: Any) -> str:
    """SHA-256 of the canonical JSON of ``state`` (dict key order, sets and -0.0 do not matter)."""
    text = json.dumps(_canonical(state), sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _diff(agent: Any, gold: Any) -> str:
    a, g = _canonical(agent), _canonical(gold)
    if isinstance(a, dict) and isinstance(g, dict):
        keys = sorted(k for k in set(a) | set(g) if a.get(k, ...) != g.get(k, ...))
        return f"state differs at keys {keys[:10]}"
    return "state differs"


def replay_actions(
    state_factory: Callable[[Task], S],
    replay: Callable[[S, Any], S | None],
    task: Task,
    actions: Sequence[Any],
) -> S:
    """A fresh state with ``actions`` applied in order (``replay`` may mutate in place or return)."""
    state = state_factory(task)
    for action in actions:
        out = replay(state, action)
        if out is not None:
            state = out
    return state


def final_state_grader(
    state_factory: Callable[[Task], S],
    replay: Callable[[S, Any], S | None],
    *,
    agent_state: Callable[[Trajectory], Any] | None = None,
    gold_actions: Callable[[Task], Sequence[Any]] | None = None,
    state_key: str = "db",
    weight: float = 1.0,
    name: str = "final_state",
) -> Grader:
    """1 when the agent's final state hashes equal to the gold replay on a fresh state, else 0.

    ``agent_state`` defaults to ``trajectory.state[state_key]``; ``gold_actions`` to
    ``task.info["gold_actions"]``. A missing state or gold is a grader error, not a 0.
    """

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        if agent_state is not None:
            agent = agent_state(trajectory)
        elif state_key in trajectory.state:
            agent = trajectory.state[state_key]
        else:
            raise ValueError(f"trajectory has no state[{state_key!r}] to compare")
        actions = gold_actions(task) if gold_actions is not None else task.info.get("gold_actions")
        if actions is None:
            raise ValueError(f"task {task.id!r} has no info['gold_actions']")
        gold = replay_actions(state_factory, replay, task, actions)
        if state_hash(agent) == state_hash(gold):
            return Grade(score=1.0, detail="final state matches gold")
        return Grade(score=0.0, detail=_diff(agent, gold))

    return Grader(grade, weight=weight, name=name)


_THOUSANDS = re.compile(r"(?<=\d)[,_](?=\d{3}(?!\d))")


def _norm_text(text: str) -> str:
    return _THOUSANDS.sub("", text).casefold()


def contains_output(text: str, output: str) -> bool:
    """Is ``output`` in ``text`` as a whole token? Case-insensitive; thousands separators ignored."""
    needle = _norm_text(output.strip())
    if not needle:
        return True
    # not glued to a word character, nor to a decimal part ("10" in "10.5", "0.5" in "10.5")
    pattern = r"(?<![\w])(?<!\d[.,])" + re.escape(needle) + r"(?![\w])(?![.,]\d)"
    return re.search(pattern, _norm_text(text)) is not None


def required_outputs_grader(
    outputs: Sequence[str] | None = None, *, partial: bool = False, weight: float = 1.0, name: str = "outputs"
) -> Grader:
    """1 when every required output appears in the assistant's replies (``partial``: the fraction)."""

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        wanted = outputs if outputs is not None else task.info.get("outputs")
        if wanted is None:
            raise ValueError(f"task {task.id!r} has no info['outputs']")
        replies = "\n".join(
            strip_think(m.content)
            for m in trajectory.messages[len(trajectory.prompt) :]
            if m.role == "assistant"
        )
        missing = [o for o in wanted if not contains_output(replies, str(o))]
        found = len(wanted) - len(missing)
        score = (found / len(wanted) if wanted else 1.0) if partial else float(not missing)
        return Grade(score=score, detail=f"missing {missing}" if missing else "all outputs present")

    return Grader(grade, weight=weight, name=name)


def _bench_replay(state: dict[str, Any], action: Mapping[str, Any]) -> None:
    op, key = action["op"], str(action["key"])
    if op == "set":
        state[key] = copy.deepcopy(action["value"])
    elif op == "delete":
        state.pop(key, None)
    elif op == "append":
        state.setdefault(key, []).append(copy.deepcopy(action["value"]))
    elif op == "inc":
        state[key] = state.get(key, 0) + action.get("value", 1)
    else:
        raise ValueError(f"unknown op {op!r}")


def bench_verdict(line: dict[str, Any]) -> bool:
    """The verdict of this family's graders on one suite line (see the module docstring)."""
    kind = line.get("kind", "ast")
    if kind == "ast":
        try:
            calls = [_to_call(c) for c in line["calls"]]
        except ValueError:
            return False
        return match_any(
            calls, line["answers"], line.get("functions"), strings=line.get("strings", "strict")
        ).ok
    if kind == "state":
        task = Task(id=str(line["id"]), prompt=(), info={"gold_actions": line["gold_actions"]})
        agent = replay_actions(
            lambda t: copy.deepcopy(line["initial"]), _bench_replay, task, line["agent_actions"]
        )
        gold = replay_actions(
            lambda t: copy.deepcopy(line["initial"]), _bench_replay, task, line["gold_actions"]
        )
        return state_hash(agent) == state_hash(gold)
    if kind == "outputs":
        text = "\n".join(line["replies"])
        return all(contains_output(text, str(o)) for o in line["outputs"])
    raise ValueError(f"toolcall suite line {line.get('id')!r}: unknown kind {kind!r}")


BENCH = GraderFamily("toolcall", bench_verdict, suites=("toolcall.jsonl",))
