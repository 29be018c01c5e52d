"""``verigym env-server``'s OpenEnv surface, driven by a hand-rolled client that speaks openenv 0.10.0's
messages (``EnvClient``: ``{"type": "reset"|"step"|"state"|"close", "data"}`` over ``WS /ws``), by plain
HTTP with an ``X-Session-ID`` session, and by openenv's ``/mcp`` JSON-RPC. (openenv's own client runs in
the bench venv: its fastmcp needs mcp<2.)

Episodes driven with calc's oracle and null policies, sampled here from the observation's messages, score
exactly as the same policies do through the local harness (``run_rollouts``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from verigym.envs.registry import load_env
from verigym.envserver import EnvServer
from verigym.policies.base import Policy
from verigym.runner import run_rollouts
from verigym.types import Message, Sampling


@pytest.fixture(scope="module")
def server() -> Iterator[EnvServer]:
    with EnvServer({"calc": load_env("calc"), "wordle": load_env("wordle")}) as srv:
        yield srv


def _ws(server: EnvServer) -> str:
    return f"ws://127.0.0.1:{server.port}/ws"


def _action(policy: Policy, observation: dict[str, Any]) -> dict[str, Any]:
    """The policy's turn on the observation's messages, as a step's action (an assistant message)."""
    messages = [Message.from_openai(m) for m in observation["messages"]]
    assert all(m is not None for m in messages)
    completion = asyncio.run(
        policy.complete(messages, tools=observation["tools"], sampling=Sampling())  # type: ignore[arg-type]
    )
    calls = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in completion.tool_calls
    ]
    return {"content": completion.text, "tool_calls": calls}


def _local(policy_name: str, n: int) -> list[tuple[float | None, dict[str, float]]]:
    env = load_env("calc")
    policy = env.oracle_policy() if policy_name == "oracle" else env.null_policy()
    records = asyncio.run(
        run_rollouts(
            env,
            policy,
            env.tasks(n, seed=0, split="test"),
            samples_per_task=1,
            sampling=Sampling(),
            concurrency=1,
            env_name="calc",
            model_name=policy_name,
        )
    )
    return [(r.score.reward, {k: g.score for k, g in r.score.grades.items()}) for r in records]


@pytest.mark.parametrize("policy_name", ["oracle", "null"])
def test_websocket_episodes_score_as_the_local_harness(server: EnvServer, policy_name: str) -> None:
    env = load_env("calc")
    policy = env.oracle_policy() if policy_name == "oracle" else env.null_policy()
    expected = _local(policy_name, 4)
    tasks = env.tasks(4, seed=0, split="test")
    with connect(_ws(server)) as ws:
        for i, task in enumerate(tasks):
            ws.send(json.dumps({"type": "reset", "data": {"env": "calc", "seed": 0, "index": i}}))
            message = json.loads(ws.recv())
            assert message["type"] == "observation"
            result = message["data"]
            assert result["observation"]["task_id"] == task.id and result["done"] is False
            assert result["reward"] is None
            steps = 0
            while not result["done"]:
                ws.send(json.dumps({"type": "step", "data": _action(policy, result["observation"])}))
                message = json.loads(ws.recv())
                assert message["type"] == "observation", message
                result = message["data"]
                steps += 1
            obs = result["observation"]
            grades = {k: g["score"] for k, g in obs["score"]["grades"].items()}
            assert (result["reward"], grades) == expected[i]
            assert obs["stop_reason"] == "done" and obs["error"] is None
            assert "detail" not in obs["score"]["grades"]["correct"]  # details can quote the answer
            ws.send(json.dumps({"type": "state"}))
            state = json.loads(ws.recv())
            assert state["type"] == "state" and state["data"]["step_count"] == steps
            assert state["data"]["done"] is True
        ws.send(json.dumps({"type": "close"}))
    assert expected[0][0] == (1.0 if policy_name == "oracle" else 0.0)


def test_a_reset_names_its_task_and_wordle_runs_over_the_socket(server: EnvServer) -> None:
    with connect(_ws(server)) as ws:
        ws.send(
            json.dumps({"type": "reset", "data": {"env": "wordle", "split": "train", "seed": 3, "index": 2}})
        )
        first = json.loads(ws.recv())["data"]["observation"]
        assert (first["env"], first["split"], first["seed"], first["index"]) == ("wordle", "train", 3, 2)
        assert first["task_id"] == load_env("wordle").tasks(3, seed=3, split="train")[2].id
        assert first["messages"][0]["role"] == "system"
        ws.send(json.dumps({"type": "step", "data": {"content": "<guess>about</guess>"}}))
        after = json.loads(ws.recv())["data"]
        assert after["done"] is False and after["observation"]["turn"] == 1
        reply = after["observation"]["reply"]
        assert len(reply) == 1 and reply[0]["role"] == "user"
        assert after["observation"]["messages"][-1] == reply[0]


def test_http_sessions_keep_a_multi_step_episode(server: EnvServer) -> None:
    env = load_env("calc")
    oracle = env.oracle_policy()
    with httpx.Client(base_url=server.url, timeout=30) as client:
        reset = client.post("/reset", json={"seed": 0, "index": 1})
        assert reset.status_code == 200
        sid = reset.headers["x-session-id"]
        result = reset.json()
        assert result["observation"]["session_id"] == sid
        assert client.get("/state", headers={"X-Session-ID": sid}).json()["step_count"] == 0
        while not result["done"]:
            step = client.post(
                "/step",
                json={"action": _action(oracle, result["observation"])},
                headers={"X-Session-ID": sid},
            )
            assert step.status_code == 200, step.text
            result = step.json()
        assert result["reward"] == 1.0
        assert client.get("/state", headers={"X-Session-ID": sid}).json()["step_count"] == 2
        assert client.get(f"/sessions/{sid}").json()["done"] is True
        # the session id in the body works as well as the header
        again = client.post("/reset", json={"index": 1}).json()
        body_sid = again["observation"]["session_id"]
        step = client.post("/step", json={"action": {"content": "no"}, "session_id": body_sid})
        assert step.status_code == 200 and step.json()["observation"]["turn"] == 1
        assert client.delete(f"/sessions/{sid}").json() == {"session_id": sid, "closed": True}
        assert client.get(f"/sessions/{sid}").status_code == 404
        assert client.get("/state").json() == {"episode_id": None, "step_count": 0}


def test_resets_without_an_index_walk_the_split(server: EnvServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        ids = [
            client.post("/reset", json={"env": "calc", "seed": 7}).json()["observation"]["task_id"]
            for _ in range(3)
        ]
    assert ids == [t.id for t in load_env("calc").tasks(3, seed=7, split="test")]


def test_mcp_json_rpc_lists_and_calls_the_tools_in_a_session(server: EnvServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:

        def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
            reply = client.post("/mcp", json={"jsonrpc": "2.0", "method": method, "params": params, "id": 1})
            assert reply.status_code == 200
            return reply.json()

        tools = rpc("tools/list", {})["result"]["tools"]
        assert [t["name"] for t in tools] == ["calc"]
        assert tools[0]["inputSchema"]["properties"] == {"expr": {"type": "string"}}
        sid = rpc("openenv/session/create", {"index": 0})["result"]["session_id"]
        expr = client.get(f"/sessions/{sid}").json()["observation"]["messages"][-1]["content"].rstrip("=")
        called = rpc("tools/call", {"name": "calc", "arguments": {"expr": expr}, "session_id": sid})["result"]
        a, b = expr.split("*")
        assert called == {"content": [{"type": "text", "text": str(int(a) * int(b))}], "isError": False}
        bad = rpc("tools/call", {"name": "calc", "arguments": {"expr": "rm -rf"}, "session_id": "nope"})
        assert bad["error"]["code"] == -32602
        done = client.post(
            "/step", json={"action": {"content": str(int(a) * int(b))}}, headers={"X-Session-ID": sid}
        )
        assert done.json()["reward"] == 1.0  # the MCP call was the episode's first turn
        assert rpc("openenv/session/close", {"session_id": sid})["result"] == {
            "session_id": sid,
            "closed": True,
        }
        assert rpc("nope/method", {})["error"]["code"] == -32601


def test_info_routes(server: EnvServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get("/health").json() == {"status": "healthy"}
        meta = client.get("/metadata").json()
        assert meta["name"] == "calc" and meta["description"]
        assert client.get("/metadata", params={"env": "wordle"}).json()["name"] == "wordle"
        assert client.get("/metadata", params={"env": "nope"}).status_code == 404
        schema = client.get("/schema").json()
        assert set(schema) == {"action", "observation", "state"}
        assert "tool_calls" in schema["action"]["properties"]
        # what `openenv validate URL` checks of a running server (openenv.cli._validation)
        openapi = client.get("/openapi.json").json()
        assert isinstance(openapi["info"]["version"], str)
        assert {"/reset", "/step", "/state"} <= set(openapi["paths"])  # simulation mode: all three
        assert client.post("/mcp", json={}).json()["jsonrpc"] == "2.0"


def test_a_socket_joins_an_mcp_session_as_openenvs_mcp_client_does(server: EnvServer) -> None:
    """openenv's ``MCPToolClient`` (production mode): ``openenv/session/create`` over HTTP, then ``WS
    /ws?session_id=ID``; its resets keep the id, so HTTP tool calls and the socket share the episode."""
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        sid = http.post("/mcp", json=rpc).json()["result"]["session_id"]
        with connect(f"{_ws(server)}?session_id={sid}") as ws:
            ws.send(json.dumps({"type": "reset", "data": {"index": 2}}))
            obs = json.loads(ws.recv())["data"]["observation"]
            assert obs["session_id"] == sid and obs["index"] == 2
            ws.send(json.dumps({"type": "step", "data": {"type": "list_tools"}}))  # MCP-style: takes no turn
            listed = json.loads(ws.recv())["data"]["observation"]
            assert listed["tools"][0]["name"] == "calc" and listed["turn"] == 0
            expr = obs["messages"][-1]["content"].rstrip("=")
            call = {"name": "calc", "arguments": {"expr": expr}, "session_id": sid}
            result = http.post("/mcp", json={**rpc, "method": "tools/call", "params": call}).json()["result"]
            a, b = expr.split("*")
            assert result["content"][0]["text"] == str(int(a) * int(b))
            ws.send(json.dumps({"type": "state"}))
            assert json.loads(ws.recv())["data"]["step_count"] == 1
        assert http.get(f"/sessions/{sid}").status_code == 200  # the socket's end leaves the HTTP session
        close = {**rpc, "method": "openenv/session/close", "params": {"session_id": sid}}
        assert http.post("/mcp", json=close).json()["result"]["closed"] is True
    with connect(f"{_ws(server)}?session_id=nope") as ws:
        assert json.loads(ws.recv())["data"]["code"] == "SESSION_ERROR"
