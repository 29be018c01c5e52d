"""Tool variations: seeded, really different, and the oracle still solves every variant."""

from __future__ import annotations

import asyncio
import json

import pytest

from verigym.envs.builtin.search import SearchEnv
from verigym.envs.check import check_env
from verigym.envs.registry import load_env
from verigym.envs.tool import with_tool_variant
from verigym.tools import State, Tool, tool
from verigym.tools.variants import DISTRACTORS, make_variant
from verigym.types import Sampling, ToolCall


@tool
def lookup_order(order_id: str, verbose: bool = False) -> str:
    """Look up an order by id.

    Args:
        order_id: the order's id.
        verbose: include the line items.
    """
    return f"order {order_id} verbose={verbose}"


def bump(amount: int, state: State) -> int:
    """Add to a counter kept in the episode state.

    Args:
        amount: how much to add.
    """
    state["n"] = state.get("n", 0) + amount
    return int(state["n"])


def test_variant_is_seeded_and_renames_everything() -> None:
    tools = [lookup_order, Tool.from_function(bump)]
    a, b = make_variant(tools, 7), make_variant(tools, 7)
    assert [t.schema() for t in a.tools] == [t.schema() for t in b.tools]
    assert [t.schema() for t in make_variant(tools, 8).tools] != [t.schema() for t in a.tools]
    for original in ("lookup_order", "bump"):
        assert a.names[original] != original
        assert all(new != old for old, new in a.args[original].items())
    schema = next(t for t in a.tools if t.name == a.names["bump"]).schema()
    assert "state" not in json.dumps(schema["function"]["parameters"])  # State stays hidden
    many = make_variant(tools, 1, distractors=3)
    assert len(many.distractors) == 3 and {d.name for d in DISTRACTORS} >= set(many.distractors)


def test_variant_tools_call_the_originals() -> None:
    v = make_variant([lookup_order, Tool.from_function(bump)], 3)
    renamed = next(t for t in v.tools if t.name == v.names["lookup_order"])
    arg = v.args["lookup_order"]
    out = asyncio.run(renamed.call({arg["order_id"]: "A7", arg["verbose"]: True}))
    assert out == "order A7 verbose=True"
    with pytest.raises(ValueError, match="unexpected argument"):
        asyncio.run(renamed.call({"order_id": "A7"}))  # the original name is not accepted
    counter = next(t for t in v.tools if t.name == v.names["bump"])
    state: dict = {}
    asyncio.run(counter.call({v.args["bump"]["amount"]: 2}, state))
    assert state == {"n": 2}
    call = ToolCall(id="c", name="lookup_order", arguments='{"order_id": "X"}')
    assert v.to_original(v.to_variant(call)) == call.model_copy(
        update={"arguments": json.dumps({"order_id": "X"})}
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_search_oracle_solves_every_variant(seed: int) -> None:
    report = check_env(SearchEnv(level=2, tool_variant=seed), n=4)
    assert report.ok, [f"{r.name}: {r.detail}" for r in report.failures]


@pytest.mark.parametrize("seed", [0, 5])
def test_shop_oracle_solves_variants(seed: int) -> None:
    env = with_tool_variant(load_env("tools"), seed)  # applied post hoc to the shop env
    assert {t["function"]["name"] for t in env.tool_schemas() or []}.isdisjoint(
        {t.name for t in env.base_tools}
    )
    report = check_env(env, n=4)
    assert report.ok, [f"{r.name}: {r.detail}" for r in report.failures]


def test_variant_breaks_an_unmapped_policy() -> None:
    """Without the mapping, a policy calling the original names fails: the variant is real."""
    env = SearchEnv(level=1, tool_variant=4)
    task = env.tasks(1)[0]
    plain = SearchEnv(level=1)
    plain.tasks(1)
    unmapped = plain.oracle_policy()  # speaks the original tool names
    traj = asyncio.run(env.rollout(task, unmapped, Sampling()))
    assert any(m.role == "tool" and m.content.startswith("Error: unknown tool") for m in traj.messages)
    mapped = asyncio.run(env.rollout(task, env.oracle_policy(), Sampling()))
    score = asyncio.run(env.rubric.score(task, mapped))
    assert score.reward == 1.0
