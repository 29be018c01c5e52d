"""MCP from the command line and configs: `verigym eval ENV --mcp "CMD ARGS"` (stdio),
`--mcp http://127.0.0.1:PORT/mcp` (streamable HTTP) and `[[tools.mcp]]`, against real MCP servers
started by the test; a model served over HTTP calls the server's tool through the environment."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from agentic_judge_server import start_judge
from typer.testing import CliRunner

from verigym.cli import app
from verigym.eval.store import load_records
from verigym.tools import MCPTools

HERE = Path(__file__).resolve().parent
ENV = f"{HERE / 'agentic_envs.py'}:NeedsAdd"
SERVER = HERE / "agentic_mcp_server.py"
STDIO = shlex.join([sys.executable, str(SERVER)])
runner = CliRunner()


@pytest.fixture(scope="module")
def model() -> Iterator[str]:
    proc, url = start_judge()
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def http_mcp() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.HTTPError:
            assert proc.poll() is None and time.monotonic() < deadline, "the HTTP MCP server did not start"
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def _eval(model: str, out: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(
        app, ["eval", ENV, "-n", "2", "--base-url", model, "--model", "tool-user", "--out", str(out), *args]
    )
    return result.exit_code, result.output


def _rewards(out: Path) -> list[float | None]:
    return [r.score.reward for r in load_records(out / "results.jsonl")]


def test_without_mcp_the_tool_is_missing(model: str, tmp_path: Path) -> None:
    code, text = _eval(model, tmp_path / "none")
    assert code == 0, text
    assert _rewards(tmp_path / "none") == [0.0, 0.0]


def test_mcp_flag_over_stdio(model: str, tmp_path: Path) -> None:
    code, text = _eval(model, tmp_path / "stdio", "--mcp", STDIO)
    assert code == 0, text
    assert _rewards(tmp_path / "stdio") == [1.0, 1.0]
    record = load_records(tmp_path / "stdio" / "results.jsonl")[0]
    assert [m.content for m in record.trajectory.messages if m.role == "tool"] == ["7"]
    saved = json.loads((tmp_path / "stdio" / "config.json").read_text())["config"]["tools"]["mcp"]
    assert saved[0]["command"] == [sys.executable, str(SERVER)]


def test_mcp_flag_over_streamable_http(model: str, http_mcp: str, tmp_path: Path) -> None:
    code, text = _eval(model, tmp_path / "http", "--mcp", http_mcp)
    assert code == 0, text
    assert _rewards(tmp_path / "http") == [1.0, 1.0]


def test_tools_mcp_table_in_a_config_with_a_prefix(model: str, http_mcp: str, tmp_path: Path) -> None:
    config = tmp_path / "eval.toml"
    config.write_text(
        f'[[tools.mcp]]\nurl = "{http_mcp}"\nprefix = "remote_"\n[[tools.mcp]]\ncommand = {json.dumps([sys.executable, str(SERVER)])}\n'
    )
    code, text = _eval(model, tmp_path / "cfg", "--config", str(config))
    assert code == 0, text  # both servers' tools offered: remote_add, remote_shout, add, shout
    assert _rewards(tmp_path / "cfg") == [1.0, 1.0]


def test_mcp_tools_class_over_http(http_mcp: str) -> None:
    import asyncio

    with MCPTools(url=http_mcp) as tools:
        assert sorted(t.name for t in tools.tools) == ["add", "shout"]
        assert asyncio.run(tools.call("shout", {"text": "hi"})) == "HI"


def test_bad_mcp_is_one_line_exit_2(model: str, tmp_path: Path) -> None:
    cases = {
        "failed to start": ["--mcp", f"{sys.executable} -c 'import sys; sys.exit(3)'"],
        "http://127.0.0.1:9/mcp": ["--mcp", "http://127.0.0.1:9/mcp"],
        "already offered": ["--mcp", STDIO, "--mcp", STDIO],
        "No closing quotation": ["--mcp", "python 'unterminated"],
    }
    for needle, args in cases.items():
        code, text = _eval(model, tmp_path / "bad", *args)
        assert code == 2 and needle in text and "Traceback" not in text, (needle, text)
    result = runner.invoke(
        app, ["eval", f"{HERE / 'agentic_envs.py'}:OnePlusTwo", "--base-url", model, "--mcp", STDIO]
    )
    assert result.exit_code == 2 and "not a tool environment" in result.output, result.output


def test_train_config_tools_mcp_reaches_every_tool_env(tmp_path: Path) -> None:
    from verigym.envs.prepare import close_servers
    from verigym.envs.registry import EnvError
    from verigym.train.config import load_config
    from verigym.train.rl import load_envs

    config = tmp_path / "train.toml"
    server = json.dumps([sys.executable, str(SERVER)])
    config.write_text(
        f'[[envs]]\nname = "{HERE / "agentic_envs.py"}:NeedsAdd"\n[[tools.mcp]]\ncommand = {server}\nprefix = "m_"\n'
    )
    envs = load_envs(load_config(config))
    try:
        assert [t.name for t in envs[0][1].tools] == ["m_add", "m_shout"]  # type: ignore[attr-defined]
    finally:
        close_servers()
    config.write_text(f'[[envs]]\nname = "arithmetic"\n[[tools.mcp]]\ncommand = {server}\n')
    with pytest.raises(EnvError, match="not a tool environment"):
        load_envs(load_config(config))
