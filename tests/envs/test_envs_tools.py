"""Tool schemas from signatures and docstrings, argument validation, and ToolEnv episodes."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel

from verigym.envs.tool import ToolEnv
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Grader, Rubric
from verigym.tools import State, Tool, ToolArgumentError, tool, tool_parts
from verigym.types import Message, Sampling, Task, ToolCall, Trajectory


class Item(BaseModel):
    sku: str
    qty: int = 1


@tool
def add(a: int, b: int = 0) -> int:
    """Add two integers.

    Args:
        a: the first term.
        b: the second term.
    """
    return a + b


@tool(name="order", description="Place an order.")
async def place_order(items: list[Item], mode: Literal["fast", "cheap"] = "cheap") -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"n": sum(i.qty for i in items), "mode": mode}


def test_schema_from_signature_and_docstring() -> None:
    schema = add.schema()
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["name"] == "add" and fn["description"] == "Add two integers."
    params = fn["parameters"]
    assert params["required"] == ["a"]
    assert params["properties"]["a"] == {"type": "integer", "description": "the first term."}
    assert params["properties"]["b"]["default"] == 0
    assert params["additionalProperties"] is False
    jsonschema.Draft202012Validator.check_schema(params)
    order = place_order.schema()["function"]
    assert order["name"] == "order" and order["description"] == "Place an order."
    assert order["parameters"]["properties"]["mode"]["enum"] == ["fast", "cheap"]
    jsonschema.validate({"items": [{"sku": "x"}]}, order["parameters"])


def test_schema_is_a_copy_and_tool_is_immutable() -> None:
    add.schema()["function"]["parameters"]["properties"].clear()
    assert "a" in add.schema()["function"]["parameters"]["properties"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        add.name = "plus"  # type: ignore[misc]
    renamed = dataclasses.replace(add, name="plus")
    assert renamed.schema()["function"]["name"] == "plus" and add.name == "add"


async def test_call_validates_and_converts() -> None:
    assert await add.call({"a": 2, "b": "3"}) == "5"
    assert (
        await place_order.call({"items": [{"sku": "x", "qty": 2}], "mode": "fast"}) == '{"n":2,"mode":"fast"}'
    )
    with pytest.raises(ToolArgumentError, match="a: missing required argument"):
        await add.call({"b": 1})
    with pytest.raises(ToolArgumentError, match="c: unexpected argument"):
        await add.call({"a": 1, "c": 1})
    with pytest.raises(ToolArgumentError, match="valid integer"):
        await add.call({"a": "two"})
    assert add(1, 2) == 3  # a decorated function stays callable


def test_bad_signatures_are_refused() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    def star(*args: int) -> int:
        return 0

    with pytest.raises(TypeError, match="needs a type annotation"):
        Tool.from_function(untyped)
    with pytest.raises(TypeError, match=r"\*args"):
        Tool.from_function(star)
    with pytest.raises(TypeError, match="needs a name"):
        Tool.from_function(lambda x: x)


def test_state_parameter_is_hidden_from_the_schema() -> None:
    @tool
    def remember(fact: str, memory: State) -> str:
        """Remember a fact."""
        memory.setdefault("facts", []).append(fact)
        return f"{len(memory['facts'])} facts"

    assert remember.state_param == "memory"
    assert list(remember.parameters["properties"]) == ["fact"]
    state: dict[str, Any] = {}
    assert asyncio.run(remember.call({"fact": "x"}, state)) == "1 facts"
    assert state == {"facts": ["x"]}


# --- ToolEnv -----------------------------------------------------------------------------


def boom(x: int) -> str:
    """Always fails."""
    raise RuntimeError(f"broken {x}")


async def slow() -> str:
    """Takes too long."""
    await asyncio.sleep(10)
    return "late"


def sync_slow() -> str:
    """Blocks a thread briefly."""
    time.sleep(0.05)
    return "done"


def count(memory: State) -> int:
    """Count calls in this episode."""
    memory["n"] = memory.get("n", 0) + 1
    return int(memory["n"])


class Calc(ToolEnv):
    name = "calc"

    def setup_state(self, task: Task) -> dict[str, Any]:
        return {"n": 0}

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        if split != "test":
            raise ValueError(f"no split {split!r}")
        return [Task(id="t0", prompt=(Message(role="user", content="2+3?"),), answer="5")]


def final_is_answer(task: Task, t: Trajectory) -> bool:
    return t.final_text == task.answer


def make_env(**kw: Any) -> Calc:
    kw.setdefault("tool_timeout_s", 0.2)
    return Calc([add, boom, slow, sync_slow, count], rubric=Rubric([Grader(final_is_answer)]), **kw)


def script(*turns: Sequence[ToolCall] | str) -> ScriptedPolicy:
    def reply(messages: Sequence[Message]) -> Any:
        i = sum(m.role == "assistant" for m in messages)
        step = turns[min(i, len(turns) - 1)]
        return step if isinstance(step, str) else ("", list(step))

    return ScriptedPolicy(reply)


def call(name: str, args: str, i: int = 0) -> ToolCall:
    return ToolCall(id=f"c{i}", name=name, arguments=args)


async def run(env: Calc, policy: ScriptedPolicy) -> Trajectory:
    return await env.rollout(env.tasks()[0], policy, Sampling())


async def test_tool_env_episode_ends_when_model_answers() -> None:
    env = make_env()
    assert [s["function"]["name"] for s in env.tool_schemas() or []] == [
        "add",
        "boom",
        "slow",
        "sync_slow",
        "count",
    ]
    traj = await run(env, script([call("add", '{"a": 2, "b": 3}')], "5"))
    assert traj.stop_reason == "done" and traj.error is None
    assert [t.source for t in traj.turns] == ["model", "env", "model"]
    tool_msg = traj.turns[1].messages[0]
    assert (tool_msg.role, tool_msg.content, tool_msg.tool_call_id, tool_msg.name) == (
        "tool",
        "5",
        "c0",
        "add",
    )
    assert (await env.rubric.score(env.tasks()[0], traj)).reward == 1.0


async def test_model_mistakes_become_tool_messages() -> None:
    env = make_env()
    bad = [
        call("nope", "{}", 0),
        call("add", "{not json", 1),
        call("add", '{"a": "x"}', 2),
        call("boom", '{"x": 7}', 3),
        call("slow", "{}", 4),
        call("add", "[1, 2]", 5),
    ]
    traj = await run(env, script(bad, "5"))
    assert traj.error is None and traj.stop_reason == "done"
    out = [m.content for m in traj.turns[1].messages]
    assert [m.tool_call_id for m in traj.turns[1].messages] == [f"c{i}" for i in range(6)]
    assert out[0].startswith("Error: unknown tool 'nope'") and "add, boom" in out[0]
    assert "not valid JSON" in out[1]
    assert "invalid arguments for 'add'" in out[2] and "a:" in out[2]
    assert out[3] == "Error: tool 'boom' raised RuntimeError: broken 7"
    assert "timed out after 0.2s" in out[4]
    assert "JSON object" in out[5]


async def test_state_is_per_episode_and_stored() -> None:
    env = make_env(parallel_tool_calls=True, tool_timeout_s=60)  # sync_slow's 0.05 s never times out
    policy = script([call("count", "{}", 0), call("sync_slow", "{}", 1)], [call("count", "{}", 2)], "done")
    first, second = await asyncio.gather(run(env, policy), run(env, policy))
    assert first.state == {"n": 2} and second.state == {"n": 2}
    assert first.turns[1].messages[1].content == "done"


async def test_max_turns_and_output_truncation() -> None:
    @tool
    def big() -> str:
        """Returns a lot."""
        return "x" * 100

    class Big(Calc):
        pass

    env = Big([big], max_turns=2, max_tool_output_chars=10)
    traj = await env.rollout(env.tasks()[0], script([call("big", "{}")]), Sampling())
    assert traj.stop_reason == "max_turns"
    assert traj.turns[1].messages[0].content.startswith("x" * 10 + "\n...[truncated 90")


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        Calc([add, add])


async def test_methods_partials_and_callable_objects() -> None:
    class Shop:
        """A shop."""

        def __init__(self) -> None:
            self.stock = {"apple": 3}

        def count(self, item: str) -> int:
            """Units in stock.

            Args:
                item: the product name.
            """
            return self.stock.get(item, 0)

        async def __call__(self, item: str) -> str:
            return f"bought {item}"

    shop = Shop()
    method = Tool.from_function(shop.count)
    assert (
        method.name == "count"
        and method.parameters["properties"]["item"]["description"] == "the product name."
    )
    assert await method.call({"item": "apple"}) == "3"
    obj = Tool.from_function(shop, name="buy")
    assert obj.description == "A shop." and await obj.call({"item": "pear"}) == "bought pear"

    def power(base: int, exp: int) -> int:
        """Raise to a power."""
        return int(base**exp)

    square = Tool.from_function(functools.partial(power, exp=2), name="square")
    assert square.description == "Raise to a power." and await square.call({"base": 7}) == "49"


def test_check_env_on_a_tool_env() -> None:
    from verigym.envs.check import check_env

    report = check_env(make_env(), n=1)
    assert report.ok, report.failures
    assert "unknown tool" in next(r.detail for r in report.results if r.name == "rollout")


async def test_sync_tool_timeout_counts_only_its_own_run() -> None:
    release = threading.Event()

    @tool
    def hold() -> str:
        """Wait for the test (60 s only bounds a failure)."""
        release.wait(60)
        return "held"

    @tool
    def nap() -> str:
        """Return at once."""
        return "woke"

    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2))  # this test's loop only
    try:
        with pytest.raises(TimeoutError):
            await hold.call({}, timeout=0.05)  # its thread stays busy until the release
        blocker = asyncio.ensure_future(hold.call({}))  # the second and last thread
        # More calls than worker threads: queued calls must not time out while they wait for a
        # thread. They wait longer than their timeout for certain (both threads are held), then
        # each runs in far less than it.
        queued = asyncio.gather(*(nap.call({}, timeout=1.0) for _ in range(8)))
        await asyncio.sleep(1.2)
        assert not queued.done()
        release.set()
        assert await queued == ["woke"] * 8
        assert await blocker == "held"
    finally:
        release.set()


def test_tool_parts_reads_both_schema_shapes_and_skips_nameless_ones() -> None:
    schemas: list[Any] = [
        {
            "type": "function",
            "function": {"name": "add", "description": "Add.", "parameters": {"type": "object"}},
        },
        {"name": "look", "parameters": None},
        {"name": "raw", "parameters": {"type": "string"}},
        {"function": {"description": "no name"}},
        {"name": ""},
        "not a schema",
    ]
    assert tool_parts(schemas) == [
        ("add", "Add.", {"type": "object", "properties": {}}),
        ("look", "", {"type": "object", "properties": {}}),
        ("raw", "", {"type": "string"}),
    ]
    assert tool_parts(None) == [] and tool_parts([add.schema()])[0][0] == "add"
