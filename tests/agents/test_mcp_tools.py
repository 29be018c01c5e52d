"""An environment's tools reach an agent command as an MCP server (issue 38 item 1): ``VERIGYM_MCP_URL``
is the rollout's gateway session's ``/mcp`` (streamable HTTP). The command, written here and speaking the
official ``mcp`` client, lists the tools (the env's schemas), calls them (the env's result; bad arguments
and unknown tools give the env's ``Error: ...`` text with ``isError``), state is the rollout's own, and a
rollout with calc's oracle as the policy scores 1. An unknown session's MCP URL gets a 401, a closed
one's a 409, a session without tools a 404."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from verigym.agents import agent_env
from verigym.envs.builtin.calc import CalcEnv, calc
from verigym.gateway import Gateway, SessionTools
from verigym.policies.scripted import ScriptedPolicy
from verigym.tools import State, Tool
from verigym.types import Sampling, ToolCall

AGENT = """
import asyncio, json, os, sys

import openai
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    task = json.load(sys.stdin)
    report = {"mcp_url": os.environ.get("VERIGYM_MCP_URL")}
    async with streamable_http_client(os.environ["VERIGYM_MCP_URL"]) as (read, write), ClientSession(
        read, write
    ) as mcp:
        await mcp.initialize()
        listed = (await mcp.list_tools()).tools
        report["tools"] = [
            {"name": t.name, "description": t.description, "parameters": t.input_schema} for t in listed
        ]

        async def call(name, args):
            result = await mcp.call_tool(name, args)
            return {"text": result.content[0].text, "is_error": result.is_error}

        report["bad"] = await call("calc", {"expr": "two times three"})
        report["missing"] = await call("calc", {})
        report["unknown"] = await call("nope", {})
        if any(t.name == "bump" for t in listed):
            report["bumps"] = [(await call("bump", {}))["text"] for _ in range(2)]
        tools = [
            {"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.input_schema}}
            for t in listed
        ]
        client = openai.AsyncOpenAI(max_retries=0)
        messages, answer, results = task["messages"], "", []
        for _ in range(4):
            reply = await client.chat.completions.create(model="policy", messages=messages, tools=tools)
            message = reply.choices[0].message
            messages.append(message.model_dump(include={"role", "content", "tool_calls"}, exclude_none=True))
            if not message.tool_calls:
                answer = message.content or ""
                break
            for c in message.tool_calls:
                out = await call(c.function.name, json.loads(c.function.arguments or "{}"))
                results.append(out)
                messages.append({"role": "tool", "tool_call_id": c.id, "content": out["text"]})
        report["results"] = results
    with open(os.path.join(sys.argv[1], task["id"] + ".json"), "w") as f:
        json.dump(report, f)
    print(answer)


asyncio.run(main())
"""


def bump(state: State) -> str:
    """Count the calls of this episode; returns the count."""
    state["n"] = state.get("n", 0) + 1
    return str(state["n"])


class BumpCalc(CalcEnv):
    """calc with a stateful second tool (each rollout's state is its own)."""

    def __init__(self) -> None:
        super().__init__()
        self.tools = self.base_tools = (*self.tools, Tool.from_function(bump))


@pytest.fixture
def agent(tmp_path: Path) -> tuple[str, Path]:
    script = tmp_path / "mcp_agent.py"
    script.write_text(AGENT)
    reports = tmp_path / "reports"
    reports.mkdir()
    return f"{sys.executable} {script} {reports}", reports


def _roll(base: CalcEnv, cmd: str, n: int) -> list[tuple[Any, Any, Any]]:
    env = agent_env(base, agent_cmd=cmd, timeout_s=60)
    policy = base.oracle_policy()

    async def go() -> list[tuple[Any, Any, Any]]:
        out = []
        try:
            for task in env.tasks(n, seed=0):
                traj = await env.rollout(task, policy, Sampling(temperature=0.0, max_tokens=64))
                out.append((task, traj, await env.rubric.score(task, traj)))
        finally:
            env.close()
        return out

    return asyncio.run(go())


def test_a_command_lists_and_calls_the_env_tools_over_mcp_and_scores(agent: tuple[str, Path]) -> None:
    cmd, reports = agent
    base = BumpCalc()
    rolled = _roll(base, cmd, 2)
    schemas = {s["function"]["name"]: s["function"] for s in base.tool_schemas() or []}
    urls = set()
    for task, traj, score in rolled:
        assert traj.error is None, traj.error
        assert score.reward == 1.0, score
        report = json.loads((reports / f"{task.id}.json").read_text())
        assert report["mcp_url"].endswith("/mcp") and "/sessions/" in report["mcp_url"]
        urls.add(report["mcp_url"])
        listed = {t["name"]: t for t in report["tools"]}
        assert set(listed) == {"calc", "bump"}
        for name, fn in schemas.items():
            assert listed[name]["description"] == fn["description"]
            assert listed[name]["parameters"] == fn["parameters"]
        # the right result, through the env's runner
        assert report["results"] == [{"text": calc(_expr(task)), "is_error": False}]
        assert report["results"][0]["text"] == task.answer
        # bad arguments and an unknown tool: the env's own error text, marked isError
        for key, name, args in (
            ("bad", "calc", {"expr": "two times three"}),
            ("missing", "calc", {}),
            ("unknown", "nope", {}),
        ):
            expected = asyncio.run(base.run_call(ToolCall(id="c", name=name, arguments=json.dumps(args)), {}))
            assert expected.startswith("Error:")
            assert report[key] == {"text": expected, "is_error": True}, key
        assert report["bumps"] == ["1", "2"]  # the rollout's state, fresh for each rollout
    assert len(urls) == 2  # one session (one MCP URL) per rollout


def _expr(task: Any) -> str:
    found = re.search(r"\d+\*\d+", task.prompt[-1].content)
    assert found is not None
    return found.group(0)


def test_mcp_url_without_a_session_tools_or_an_open_session_is_refused() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
    policy = ScriptedPolicy(lambda messages: "ok", name="s")

    async def run(name: str, arguments: str) -> str:
        return "x"

    with Gateway(policy) as gw:
        unknown = httpx.post(f"{gw.url}/sessions/nobody/mcp", json=body, headers=headers)
        assert unknown.status_code == 401 and unknown.json()["error"]["code"] == "unknown_session"
        bare = gw.open()
        assert httpx.post(bare.mcp_url, json=body, headers=headers).status_code == 404
        s = gw.open(tools=SessionTools([{"name": "t", "description": "d"}], run))
        ok = httpx.post(s.mcp_url, json=body, headers=headers)
        assert ok.status_code == 200, ok.text
        tool = ok.json()["result"]["tools"][0]
        assert tool["name"] == "t" and tool["inputSchema"] == {"type": "object", "properties": {}}
        # the key as the carrier reaches the same session
        by_key = httpx.post(
            f"{gw.url}/mcp", json=body, headers={**headers, "authorization": f"Bearer {s.key}"}
        )
        assert by_key.status_code == 200 and by_key.json() == ok.json()
        gw.close(s.id)
        assert httpx.post(s.mcp_url, json=body, headers=headers).status_code == 409


def test_a_modern_mcp_client_without_the_handshake_gets_the_same_tools() -> None:
    """The 2026-07-28 era (``discover``, one self-contained POST per request) is served too."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    base = CalcEnv()

    async def run(name: str, arguments: str) -> str:
        return await base.run_call(ToolCall(id="c", name=name, arguments=arguments), {})

    async def client(url: str) -> list[Any]:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
            s.adopt(await s.discover())
            listed = (await s.list_tools()).tools
            good = await s.call_tool("calc", {"expr": "417*823"})
            bad = await s.call_tool("calc", {"expr": 5})
            text = getattr(good.content[0], "text", None)
            return [[t.name for t in listed], text, good.is_error, bad.is_error]

    with Gateway(base.oracle_policy()) as gw:
        session = gw.open(tools=SessionTools(base.tool_schemas() or [], run))
        assert asyncio.run(client(session.mcp_url)) == [["calc"], "343191", False, True]
