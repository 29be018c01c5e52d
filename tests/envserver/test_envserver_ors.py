"""``verigym env-server``'s Open Reward Standard surface, driven by ``ors-sdk``'s own client (``ors.client``):
task listing, sessions from a task spec and from (split, index), the prompt, the tools (the environment's
plus ``answer``), streamed tool calls, the reward and ``finished``; against the real command
(``verigym env-server calc``) in a subprocess. The idle reaper on an in-process server.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

os.environ.setdefault("ORS_LOG_LEVEL", "WARNING")

from ors.client import ORS
from ors.client._types import ToolCallError

from verigym.envs.registry import load_env
from verigym.envserver import EnvServer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cli_server() -> Iterator[str]:
    """``verigym env-server calc --port P`` in a subprocess; its URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "verigym", "env-server", "calc", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.stdout.read().decode() if proc.stdout else ""
                raise RuntimeError(f"verigym env-server did not start: {out}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _product(text: str) -> tuple[str, int]:
    found = re.search(r"(\d+)\*(\d+)", text)
    assert found is not None
    return found.group(0), int(found.group(1)) * int(found.group(2))


def test_ors_client_completes_full_episodes(cli_server: str) -> None:
    client = ORS(base_url=cli_server)
    try:
        env = client.environment("calc")
        assert env.list_splits() == ["train", "test"]
        tasks = env.get_task_range("test", 0, 3)
        local = load_env("calc").tasks(3, seed=0, split="test")
        assert [t.task_spec["id"] for t in tasks] == [t.id for t in local]
        assert set(tasks[0].task_spec) == {"id", "env", "split", "seed", "index", "prompt"}
        assert env.num_tasks("test") == len(load_env("calc").tasks(None, split="test"))
        assert [t.name for t in env.list_tools()] == ["calc", "answer"]
        for task in tasks:  # a session from a task spec: the tool, then the answer
            with env.session(task=task) as session:
                prompt = session.get_prompt()
                assert [b.detail for b in prompt] == [{"role": "user"}]
                expr, product = _product(prompt[-1].text)
                out = session.call_tool("calc", {"expr": expr})
                assert out.blocks[0].text == str(product) and out.finished is False and out.reward is None
                out = session.call_tool("answer", {"content": out.blocks[0].text})
                assert out.finished is True and out.reward == 1.0
                assert out.metadata is not None and out.metadata["score"]["grades"]["correct"]["score"] == 1.0
                with pytest.raises(ToolCallError, match="the episode is done"):
                    session.call_tool("answer", {"content": "again"})
        with env.session(split="test", index=1) as session:  # (split, index); a wrong answer scores 0
            out = session.call_tool("answer", {"content": "7"})
            assert out.finished is True and out.reward == 0.0
        with env.session(split="train", index=0) as session:  # a tool error is the model's, told as text
            out = session.call_tool("calc", {"expr": "import os"})
            assert out.blocks[0].text.startswith("Error:") and out.finished is False
            with pytest.raises(ToolCallError, match="not a valid tool"):
                session.call_tool("shell", {"cmd": "ls"})
    finally:
        client.close()


def test_tasks_listing_and_lookups_over_plain_http(cli_server: str) -> None:
    with httpx.Client(base_url=cli_server, timeout=30) as http:
        assert http.get("/list_environments").json() == ["calc"]
        assert http.get("/calc/splits").json() == [
            {"name": "train", "type": "train"},
            {"name": "test", "type": "test"},
        ]
        one = http.post("/calc/task", json={"split": "test", "index": 4, "seed": 2}).json()["task"]
        assert one["id"] == load_env("calc").tasks(5, seed=2, split="test")[4].id
        assert http.post("/calc/task", json={"split": "test", "index": 10**6}).status_code == 400
        assert http.post("/calc/tasks", json={"split": "dev"}).status_code == 400
        tail = http.post("/calc/task_range", json={"split": "test", "start": -2}).json()["tasks"]
        count = http.post("/calc/num_tasks", json={"split": "test"}).json()["num_tasks"]
        assert [t["index"] for t in tail] == [count - 2, count - 1]
        assert http.get("/nope/tools").status_code == 404


def test_idle_sessions_are_reaped_and_pings_keep_them() -> None:
    with EnvServer({"calc": load_env("calc")}, idle_s=0.4) as srv, httpx.Client(base_url=srv.url) as http:
        for sid in ("kept", "idle"):
            created = http.post("/create", json={"split": "test", "index": 0}, headers={"X-Session-ID": sid})
            assert created.json() == {"sid": sid}
        for _ in range(8):
            assert http.post("/ping", headers={"X-Session-ID": "kept"}).status_code == 200
            time.sleep(0.15)
        assert http.post("/ping", headers={"X-Session-ID": "idle"}).status_code == 404
        assert http.get("/calc/prompt", headers={"X-Session-ID": "kept"}).status_code == 200
        assert list(srv.table.live) == ["kept"]
