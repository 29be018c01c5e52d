"""What the serving benchmarks share (``serve_vs_transformers.py``, ``serve_vs_llamacpp.py``,
``scaling_real.py``): a server as a subprocess on 127.0.0.1 (``Server``: a free port, ready once
``/v1/models`` answers, its log's last error line when it is not), ``verigym serve``'s command line
(``verigym_server``), the machine's CPU steal ticks (``cpu_ticks``), and the load generator: greedy
chat completions from N closed-loop workers through the official ``openai.AsyncOpenAI`` client
(``run_level``, one ``Reply`` a request) with ``percentile`` over their latencies.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai

VERIGYM = "verigym"


class ServerFailed(RuntimeError):
    """A server that exited or never answered ``/v1/models``; the message is one line."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cpu_ticks() -> tuple[int, int]:
    """(steal, total) CPU ticks of the whole machine so far (``/proc/stat``; zeros where it is missing)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return 0, 0
    return (fields[7] if len(fields) > 7 else 0), sum(fields)


def one_line_reason(log: Path) -> str:
    """The line of a server's log that says why it stopped: the last error-looking line, else the last."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    if not lines:
        return "it exited without output"
    for line in reversed(lines):
        if "Error" in line or "error:" in line.lower() or "Exception" in line:
            return line
    return lines[-1]


class Server:
    """One server subprocess; ``start()`` waits until ``/v1/models`` answers and reads its model id."""

    def __init__(self, side: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.side = side
        self.argv = argv
        self.env = env
        self.log = log
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.model_id = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float) -> Server:
        argv = [*self.argv, "--port", str(self.port)]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerFailed(f"exited with status {self.proc.returncode}: {one_line_reason(self.log)}")
            try:
                reply = httpx.get(f"{self.url}/models", timeout=5)
                if reply.status_code == 200:
                    self.model_id = str(reply.json()["data"][0]["id"])
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        self.stop()
        raise ServerFailed(f"no answer on /v1/models within {timeout_s:.0f}s: {one_line_reason(self.log)}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # transformers serve can hang on SIGTERM
            self.proc.kill()
            self.proc.wait(timeout=20)


def verigym_server(model_dir: str, threads: int, log: Path) -> Server:
    """``verigym serve MODEL_DIR`` (this Python's verigym) on the CPU in float32 with ``threads`` threads."""
    argv = [sys.executable, "-m", "verigym", "serve", model_dir, "--threads", str(threads)]
    argv += ["--device", "cpu", "--dtype", "float32", "--host", "127.0.0.1"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads)}
    return Server(VERIGYM, argv, env, log)


@dataclass
class Reply:
    """One request's answer: its latency, the token counts its ``usage`` reports, why it stopped, its text."""

    latency_s: float
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    text: str


async def run_level(
    url: str,
    model: str,
    prompts: Sequence[str],
    concurrency: int,
    requests: int,
    tokens: int,
    extra: dict[str, Any] | None = None,
    timeout_s: float = 900.0,
) -> tuple[float, list[Reply]]:
    """``requests`` greedy chat completions of at most ``tokens`` tokens from ``concurrency`` closed-loop
    workers (each sends its next request when the last returns); request i asks ``prompts[i % len]``
    with ``extra`` as extra body fields. Returns (wall seconds, the replies by request index)."""
    client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=timeout_s)
    replies: list[Reply | None] = [None] * requests
    indices = iter(range(requests))

    async def worker() -> None:
        for i in indices:
            t0 = time.perf_counter()
            reply = await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": prompts[i % len(prompts)]}],
                max_tokens=tokens,
                temperature=0.0,
                extra_body=extra or None,
            )
            usage = reply.usage
            choice = reply.choices[0]
            replies[i] = Reply(
                time.perf_counter() - t0,
                usage.prompt_tokens if usage else 0,
                usage.completion_tokens if usage else 0,
                str(choice.finish_reason),
                choice.message.content or "",
            )

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - t0
    await client.close()
    return wall, [r for r in replies if r is not None]


def percentile(values: Sequence[float], q: int) -> float:
    """The ``q``-th percentile of ``values`` (inclusive method; one value is every percentile)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[q - 1]
