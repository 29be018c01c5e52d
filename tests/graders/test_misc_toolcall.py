"""Tool-call graders: AST match from trajectories, final-state replay, required outputs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from verigym.graders.toolcall import (
    Call,
    contains_output,
    final_state_grader,
    match_calls,
    required_outputs_grader,
    state_hash,
    toolcall_grader,
)
from verigym.rubric import Rubric
from verigym.types import Completion, Message, Task, ToolCall, Trajectory, Turn

FUNCS = [
    {
        "type": "function",
        "function": {
            "name": "add_item",
            "parameters": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string"},
                    "qty": {"type": "integer"},
                    "opts": {"type": "object", "properties": {"gift": {"type": "boolean"}}},
                },
                "required": ["sku", "qty"],
            },
        },
    }
]
ANSWERS = [
    {"add_item": {"sku": ["A1"], "qty": [2], "opts": [""]}},
    {"add_item": {"sku": ["B2"], "qty": [1], "opts": [""]}},
]


def _task(**info: Any) -> Task:
    return Task(id="t", prompt=(Message(role="user", content="buy"),), info=info)


def _traj(*turns: tuple[str, list[ToolCall]], state: dict[str, Any] | None = None) -> Trajectory:
    out = []
    for text, calls in turns:
        c = Completion(text=text, tool_calls=tuple(calls))
        out.append(Turn(source="model", messages=[c.as_message()], completion=c))
    return Trajectory(task_id="t", prompt=[Message(role="user", content="buy")], turns=out, state=state or {})


def _tc(name: str, args: str, i: int = 0) -> ToolCall:
    return ToolCall(id=f"c{i}", name=name, arguments=args)


async def test_parallel_calls_across_turns_match_order_free() -> None:
    g = toolcall_grader()
    traj = _traj(
        ("", [_tc("add_item", '{"sku": "b2", "qty": 1}')]),
        ("", [_tc("add_item", '{"sku": "A1", "qty": 2}', 1)]),
    )
    grade = await g.grade(_task(answers=ANSWERS, functions=FUNCS), traj)
    assert grade.score == 1.0 and grade.ok
    ordered = toolcall_grader(ordered=True)
    assert (await ordered.grade(_task(answers=ANSWERS, functions=FUNCS), traj)).score == 0.0


async def test_nested_type_and_malformed_json_fail_without_error() -> None:
    g = toolcall_grader(ANSWERS[:1], FUNCS)
    nested = _traj(("", [_tc("add_item", '{"sku": "A1", "qty": 2, "opts": {"gift": "yes"}}')]))
    grade = await g.grade(_task(), nested)
    assert grade.ok and grade.score == 0.0 and "opts.gift" in grade.detail
    broken = await g.grade(_task(), _traj(("", [_tc("add_item", '{"sku": ')])))
    assert broken.ok and broken.score == 0.0 and "malformed" in broken.detail


async def test_missing_answers_is_a_grader_error() -> None:
    grade = await toolcall_grader().grade(_task(), _traj(("hi", [])))
    assert not grade.ok and "answers" in (grade.error or "")


def test_match_calls_reasons() -> None:
    res = match_calls([Call("add_item", {"sku": "A1", "qty": 2.0})], ANSWERS[:1], [FUNCS[0]["function"]])
    assert not res.ok and "expected integer" in res.reason
    res = match_calls([Call("add_item", {"sku": "A1", "qty": 2})], ANSWERS[:1], [FUNCS[0]["function"]])
    assert res.ok


# --- final state: a tiny shop whose state is a dict; actions are tool calls --------------------------


def _fresh(task: Task) -> dict[str, Any]:
    return {"cart": {}, "stock": {"A1": 5, "B2": 1}, "orders": []}


def _replay(state: dict[str, Any], action: dict[str, Any]) -> None:
    if action["name"] == "add_item":
        sku, qty = action["arguments"]["sku"], action["arguments"]["qty"]
        state["cart"][sku] = state["cart"].get(sku, 0) + qty
    elif action["name"] == "checkout":
        for sku, qty in state["cart"].items():
            state["stock"][sku] -= qty
        state["orders"].append(dict(state["cart"]))
        state["cart"] = {}


GOLD = [{"name": "add_item", "arguments": {"sku": "A1", "qty": 2}}, {"name": "checkout", "arguments": {}}]


async def test_final_state_matches_replay_on_a_fresh_copy() -> None:
    agent = _fresh(_task())
    for a in [{"name": "add_item", "arguments": {"sku": "A1", "qty": 1}}] * 2 + [GOLD[1]]:
        _replay(agent, a)  # a different path to the same end state
    g = final_state_grader(_fresh, _replay)
    task = _task(gold_actions=GOLD)
    assert (await g.grade(task, _traj(("done", []), state={"db": agent}))).score == 1.0
    wrong = copy.deepcopy(agent)
    wrong["stock"]["B2"] = 0
    bad = await g.grade(task, _traj(("done", []), state={"db": wrong}))
    assert bad.score == 0.0 and "stock" in bad.detail
    missing = await g.grade(task, _traj(("done", [])))
    assert not missing.ok


def test_state_hash_is_canonical() -> None:
    assert state_hash({"a": 1, "b": [1, 2]}) == state_hash({"b": [1, 2], "a": 1})
    assert state_hash({"s": {3, 1, 2}}) == state_hash({"s": [1, 2, 3]})
    assert state_hash({"x": -0.0}) == state_hash({"x": 0.0})
    assert state_hash({"a": [1, 2]}) != state_hash({"a": [2, 1]})
    with pytest.raises(TypeError):
        state_hash({"f": object()})


@pytest.mark.parametrize(
    ("text", "output", "found"),
    [
        ("total 100", "10", False),
        ("total 10.", "10", True),
        ("rate 10.5%", "10", False),
        ("refund of $1,000", "1000", True),
        ("ref ABC-12", "abc-12", True),
        ("ref XABC-12", "abc-12", False),
    ],
)
def test_contains_output_whole_tokens(text: str, output: str, found: bool) -> None:
    assert contains_output(text, output) is found


async def test_required_outputs_grader_reads_replies_only() -> None:
    g = required_outputs_grader()
    task = _task(outputs=["42", "UA12"])
    traj = _traj(("Flight UA12 is booked.", []), ("It costs 42 dollars.", []))
    assert (await g.grade(task, traj)).score == 1.0
    half = required_outputs_grader(partial=True)
    assert (await half.grade(task, _traj(("It costs 420 dollars on UA12.", [])))).score == 0.5
    # the prompt itself never counts as the agent saying it
    prompt_only = Trajectory(task_id="t", prompt=[Message(role="assistant", content="42 UA12")])
    assert (await g.grade(task, prompt_only)).score == 0.0


async def test_graders_plug_into_a_rubric_with_gates() -> None:
    rubric = Rubric(
        [toolcall_grader(ANSWERS[:1], FUNCS), required_outputs_grader(["done"])],
        gates={"outputs": ["toolcall"]},
    )
    traj = _traj(("", [_tc("add_item", '{"sku": "A1", "qty": 2}')]), ("done", []))
    score = await rubric.score(_task(), traj)
    assert score.reward == 2.0


async def test_outputs_only_in_reasoning_do_not_count() -> None:
    g = required_outputs_grader(["42"])
    assert (await g.grade(_task(), _traj(("<think>the answer is 42</think>I don't know.", [])))).score == 0.0


async def test_malformed_answers_are_a_grader_error_not_a_zero() -> None:
    for bad in ([{"a": {"x": 1}}], [{"a": {}, "b": {}}], {"a": {}}):
        grade = await toolcall_grader(bad).grade(_task(), _traj(("", [_tc("a", "{}")])))
        assert not grade.ok, bad
