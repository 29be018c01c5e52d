"""The tools (shop) environment: tools over a per-episode DB, replay grading, required facts."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from verigym.envs.builtin.shop import SHOP_TOOLS, ShopEnv, make_db
from verigym.envs.check import check_env
from verigym.envs.registry import load_env
from verigym.graders.toolcall import state_hash
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.types import Message, Sampling, Task, ToolCall


@pytest.mark.parametrize("level", [1, 3])
def test_check_env_passes(level: int) -> None:
    report = check_env(load_env("tools", level=level), n=6)
    assert report.ok, report.failures


def test_tools_are_public_and_typed() -> None:
    env = ShopEnv()
    names = [t.name for t in env.tools]
    assert names == [t.name for t in SHOP_TOOLS]
    assert {
        "lookup_customer",
        "search_products",
        "get_order",
        "update_address",
        "refund",
        "cancel_order",
    } <= set(names)
    schema = env.tool("refund").schema()  # type: ignore[union-attr]
    assert schema["function"]["parameters"]["properties"]["amount"]["type"] == "number"
    assert "state" not in schema["function"]["parameters"]["properties"]


def _refund_task(level: int = 2) -> Task:
    env = ShopEnv(level=level)
    return next(t for t in env.tasks(40) if [a["name"] for a in t.info["gold_actions"]] == ["refund"])


def _replying(actions: Sequence[dict[str, object]], text: str) -> ScriptedPolicy:
    def reply(messages: Sequence[Message]) -> Reply:
        if not any(m.role == "assistant" for m in messages):
            return "", [
                ToolCall(id=f"c{i}", name=str(a["name"]), arguments=json.dumps(a["arguments"]))
                for i, a in enumerate(actions)
            ]
        return text

    return ScriptedPolicy(reply)


async def test_replay_grading_catches_a_wrong_refund() -> None:
    env = ShopEnv(level=2)
    task = _refund_task()
    gold = task.info["gold_actions"][0]
    amount = gold["arguments"]["amount"]
    facts = " ".join(task.info["outputs"])
    right = await env.rollout(task, _replying([gold], f"Refunded {facts}."), Sampling())
    assert (await env.rubric.score(task, right)).reward == 1.0
    wrong_action = {"name": "refund", "arguments": {**gold["arguments"], "amount": round(amount - 1, 2)}}
    wrong = await env.rollout(task, _replying([wrong_action], f"Refunded {facts}."), Sampling())
    score = await env.rubric.score(task, wrong)
    assert score.reward == 0.0 and score.grades["final_state"].score == 0.0
    assert score.grades["outputs"].detail == "gated"
    silent = await env.rollout(task, _replying([gold], "Done."), Sampling())
    assert (await env.rubric.score(task, silent)).reward == 0.0  # right state, amount not stated


async def test_policy_violations_are_tool_errors_and_episodes_are_isolated() -> None:
    env = ShopEnv(level=2)
    task = env.tasks(1)[0]
    db = make_db(int(task.info["db_seed"]))
    shipped = next(o for o in db["orders"].values() if o["status"] == "shipped")
    bad = [{"name": "cancel_order", "arguments": {"order_id": shipped["id"]}},
           {"name": "refund", "arguments": {"order_id": shipped["id"], "amount": 1.0}}]  # fmt: skip
    traj = await env.rollout(task, _replying(bad, "Sorry."), Sampling())
    tool_msgs = [m.content for m in traj.messages if m.role == "tool"]
    assert "only pending orders can be cancelled" in tool_msgs[0]
    assert "only delivered orders can be refunded" in tool_msgs[1]
    assert state_hash(traj.state["db"]) == state_hash(db)  # nothing changed
    oracle = await env.rollout(task, env.oracle_policy(), Sampling())
    assert state_hash(oracle.state["db"]) != state_hash(db)
    assert state_hash(make_db(int(task.info["db_seed"]))) == state_hash(db)  # fresh copy per episode


async def test_lookup_tools_answer_from_the_episode_db() -> None:
    env = ShopEnv(level=1)
    task = env.tasks(1)[0]
    db = make_db(int(task.info["db_seed"]))
    customer = next(iter(db["customers"].values()))
    state = {"db": db}
    found = json.loads(await env.tool("lookup_customer").call({"email": customer["email"].upper()}, state))  # type: ignore[union-attr]
    assert found["id"] == customer["id"]
    orders = json.loads(await env.tool("list_orders").call({"customer_id": customer["id"]}, state))  # type: ignore[union-attr]
    assert sorted(o["status"] for o in orders) == ["delivered", "pending", "shipped"]
    hits = json.loads(await env.tool("search_products").call({"query": "garden", "max_price": 1000}, state))  # type: ignore[union-attr]
    assert len(hits) == 4 and all(h["category"] == "garden" for h in hits)


def test_oracle_solves_a_tool_variant() -> None:
    env = ShopEnv(level=2, tool_variant=5)
    assert {t.name for t in env.tools} != {t.name for t in SHOP_TOOLS}
    report = check_env(env, n=4)
    assert report.ok, report.failures
