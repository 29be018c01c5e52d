"""MCP tools in a ToolEnv (a real stdio MCP server) and ReSum context summarization."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from verigym.envs.summarize import SUMMARY_HEADER, ReSumEnv, approx_tokens
from verigym.envs.tool import ToolEnv
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Grader, Rubric
from verigym.tools import MCPError, MCPTools, tool
from verigym.types import Grade, Message, Sampling, Task, ToolCall, Trajectory

SERVER = Path(__file__).with_name("envs_mcp_server.py")


def _answer_is_7(task: Task, trajectory: Trajectory) -> Grade:
    return Grade(score=float(trajectory.final_text.strip() == "7"))


class _Env(ToolEnv):
    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return [Task(id="t0", prompt=(Message(role="user", content="Add 2 and 5, keep a note."),))]


def test_mcp_tools_round_trip_in_a_tool_env() -> None:
    with MCPTools([sys.executable, str(SERVER)]) as mcp:
        names = sorted(t.name for t in mcp.tools)
        assert names == ["add", "read_note", "save_note"]
        env = _Env(mcp.tools, rubric=Rubric([Grader(_answer_is_7, name="seven")]))
        schema = next(s for s in env.tool_schemas() or [] if s["function"]["name"] == "add")
        assert schema["function"]["parameters"]["required"] == ["a"]
        assert schema["function"]["description"] == "Add two integers."
        plan = [
            ToolCall(id="1", name="add", arguments='{"a": 2, "b": 5}'),
            ToolCall(id="2", name="save_note", arguments='{"key": "k", "text": "hello"}'),
            ToolCall(id="3", name="read_note", arguments='{"key": "k"}'),
            ToolCall(id="4", name="read_note", arguments='{"key": "missing"}'),
            ToolCall(id="5", name="add", arguments='{"b": 1}'),
        ]

        def reply(messages: Sequence[Message]) -> object:
            done = sum(1 for m in messages if m.role == "tool")
            return ("", plan[done : done + 1]) if done < len(plan) else "7"

        task = env.tasks()[0]
        traj = asyncio.run(env.rollout(task, ScriptedPolicy(reply), Sampling()))  # type: ignore[arg-type]
        outs = [m.content for m in traj.messages if m.role == "tool"]
        assert outs[0] == "7" and outs[1] == "saved k" and outs[2] == "hello"
        assert outs[3].startswith("Error:")  # the server's error result reaches the model
        assert outs[4].startswith("Error: invalid arguments") and "a: missing" in outs[4]
        assert asyncio.run(env.rubric.score(task, traj)).reward == 1.0
    with pytest.raises(MCPError):
        asyncio.run(mcp.call("add", {"a": 1}))  # closed


def test_mcp_bad_command_is_one_clear_error() -> None:
    with pytest.raises(MCPError, match=r"failed to start|did not start"):
        MCPTools([sys.executable, "-c", "import sys; sys.exit(3)"], startup_timeout_s=20)


@tool
def fetch(page: int) -> str:
    """Fetch a long page.

    Args:
        page: page number.
    """
    return f"page {page}: " + "lorem ipsum " * 40


class _Long(ToolEnv):
    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return [Task(id="long", prompt=(Message(role="user", content="Read pages 0..5 then answer."),))]


def _pages(messages: Sequence[Message]) -> set[str]:
    text = " ".join(m.content for m in messages if m.role == "tool" or m.content.startswith(SUMMARY_HEADER))
    return set(re.findall(r"page (\d+)", text))


def _reader(shown: list[list[Message]]) -> ScriptedPolicy:
    def reply(messages: Sequence[Message]) -> object:
        if messages[-1].content.startswith("The conversation is getting long"):
            return "read " + ", ".join(f"page {p}" for p in sorted(_pages(messages)))
        shown.append(list(messages))
        done = len(_pages(messages))
        if done < 6:
            return "", [ToolCall(id=f"c{done}", name="fetch", arguments=json.dumps({"page": done}))]
        return "finished"

    return ScriptedPolicy(reply, name="reader")  # type: ignore[arg-type]


def test_resum_triggers_at_the_budget() -> None:
    inner = _Long([fetch], rubric=Rubric([Grader(lambda t, tr: 1.0, name="one")]), max_turns=20)
    page_tokens = approx_tokens([Message(role="tool", content=fetch(0))])
    budget = 3 * page_tokens  # a few pages fit, then the context must be summarized
    shown: list[list[Message]] = []
    env = ReSumEnv(inner, max_context_tokens=budget)
    traj = asyncio.run(env.rollout(inner.tasks()[0], _reader(shown), Sampling()))
    assert traj.stop_reason == "done" and traj.final_text == "finished"
    summaries = [t for t in traj.turns if t.source == "summary"]
    assert summaries and len(traj.state["resum"]) == len(summaries)
    assert all(e["context_tokens"] > budget for e in traj.state["resum"])
    # every context the policy saw after a summary starts with the prompt and that summary
    assert all(approx_tokens(view) <= budget + page_tokens + 40 for view in shown)
    after = [v for v in shown if any(m.content.startswith(SUMMARY_HEADER) for m in v)]
    assert after and all(v[1].content.startswith(SUMMARY_HEADER) for v in after)
    # nothing is lost from the trajectory: all six pages are still recorded
    assert sum(m.role == "tool" for m in traj.messages) == 6
    # written by the rollout policy itself: the summary turn carries its completion (trainable)
    assert all(t.completion is not None for t in summaries)
    assert all(e["by_rollout_policy"] for e in traj.state["resum"])
    # no summary when the budget is not reached
    big = asyncio.run(
        ReSumEnv(inner, max_context_tokens=10**6).rollout(inner.tasks()[0], _reader([]), Sampling())
    )
    assert not any(t.source == "summary" for t in big.turns)


def test_resum_other_summarizer_is_environment_text() -> None:
    inner = _Long([fetch], rubric=Rubric([Grader(lambda t, tr: 1.0, name="one")]), max_turns=20)
    summarizer = ScriptedPolicy(lambda m: "pages read so far: " + " ".join("page" for _ in m), name="summ")
    env = ReSumEnv(inner, max_context_tokens=200, summarizer=summarizer)
    traj = asyncio.run(env.rollout(inner.tasks()[0], _reader([]), Sampling()))
    summaries = [t for t in traj.turns if t.source == "summary"]
    assert summaries and all(t.completion is None for t in summaries)  # masked out of training
    assert summarizer.calls == len(summaries)
    assert traj.completions and all(c.model == "reader" for c in traj.completions)
    Trajectory.model_validate_json(traj.model_dump_json())  # round-trips with summary turns
