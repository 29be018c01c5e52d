"""``verigym.serve.serve_model`` / ``start_model_server`` / ``open_served_policy`` called as a library,
without the CLI: a config in, events out, a server on 127.0.0.1 answering and stopped."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from verigym.serve import (
    ServeConfig,
    ServeEvent,
    ServeSetupError,
    check,
    open_served_policy,
    start_model_server,
)


def test_start_model_server_opens_the_model_and_serves_it(tmp_path: Path) -> None:
    events: list[ServeEvent] = []
    config = ServeConfig(model="tiny", port=0, name="mine", device="cpu", api_key="k", max_batch_rows=4)
    with start_model_server(config, on_event=events.append) as server:
        url = server.url
        headers = {"Authorization": "Bearer k"}
        models = httpx.get(f"{server.url}/models", headers=headers, timeout=30).json()
        assert [m["id"] for m in models["data"]] == ["mine"]
        assert httpx.get(f"{server.url}/models", timeout=30).status_code == 401  # the key is required
        reply = httpx.post(
            f"{server.url}/completions",
            json={"model": "mine", "prompt": "1+1=", "max_tokens": 2, "temperature": 0},
            headers=headers,
            timeout=60,
        )
        assert reply.status_code == 200 and len(reply.json()["choices"][0]["token_ids"]) <= 2
    kinds = [e.kind for e in events]
    assert kinds == ["loading", "policy", "ready"]  # a fresh tiny model says what it is
    ready = events[-1]
    assert (ready.name, ready.url, ready.device) == ("mine", url, "cpu") and ready.parameters > 0


def test_setup_problems_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ServeSetupError, match=r"--port must be in 1\.\.65535, got 0"):
        check(ServeConfig(model="tiny", port=0))
    check(ServeConfig(model="tiny", port=0), listen=False)  # a thread server picks a free port
    with pytest.raises(ServeSetupError, match="--max-batch-rows must be at least 1, got 0"):
        check(ServeConfig(model="tiny", max_batch_rows=0), listen=False)
    with pytest.raises(ServeSetupError, match=r"--allow-adapter-loading .*: no such directory"):
        check(ServeConfig(model="tiny", adapter_dir=tmp_path / "none"), listen=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServeSetupError, match=f"--host 127.0.0.1 --port {port}: cannot listen there"):
            check(ServeConfig(model="tiny", port=port))
    with pytest.raises(ServeSetupError, match="MODEL_PATH /nonexistent/dir: no such directory"):
        open_served_policy(ServeConfig(model="/nonexistent/dir"))
    with pytest.raises(ServeSetupError, match="--dtype int8: Input should be"):
        open_served_policy(ServeConfig(model="tiny", dtype="int8"))
    with pytest.raises(ServeSetupError, match="--lora 'nameless': expected NAME=PATH"):
        open_served_policy(ServeConfig(model="tiny", device="cpu", lora=("nameless",)))


def test_serve_model_serves_in_the_foreground_until_interrupted(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = (
        "from verigym.serve import ServeConfig, serve_model\n"
        f"serve_model(ServeConfig(model='tiny', port={port}, threads=1, device='cpu'),"
        " on_event=lambda e: print(e.kind, e.url, flush=True))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        assert httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()["data"][0]["id"]
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    lines = out.decode().splitlines()
    assert lines[0].startswith("loading") and f"ready http://127.0.0.1:{port}/v1" in lines, (
        lines,
        err[-2000:],
    )
