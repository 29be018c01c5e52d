"""Helpers of the ``verigym serve`` tests: a ``verigym serve`` subprocess with its log captured and its
memory readable (``start_serve``), and a raw-socket HTTP/1.1 client for what ordinary clients will not
send (``raw_request``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import h11
import httpx

__all__ = ["KEY", "Served", "raw_request", "start_serve", "stop_serve"]

KEY = "vg-test-0123456789abcdef"  # the key of the keyed servers (tests only)


@dataclass
class Served:
    """A ``verigym serve`` subprocess: ``root`` is ``http://127.0.0.1:PORT``, ``url`` its ``/v1``."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    def rss_mb(self) -> float:
        """The server's resident memory (``VmRSS`` of ``/proc/PID/status``) in MiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def alive(self, within_s: float = 5.0) -> float:
        """Assert the process runs and ``/health`` answers 200 within ``within_s``; the seconds it took."""
        assert self.proc.poll() is None, self.log.read_text(errors="replace")[-3000:]
        start = time.monotonic()
        r = httpx.get(f"{self.root}/health", timeout=within_s)
        took = time.monotonic() - start
        assert r.status_code == 200 and took < within_s, (r.status_code, took)
        return took


def start_serve(model: Path, log: Path, *args: str, env: dict[str, str] | None = None) -> Served:
    """``verigym serve MODEL --name tiny *args`` on a free port, its output in ``log``."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "verigym", "serve", str(model), "--port", str(port), "--threads", "1",
             "--name", "tiny", *args],
            stdout=fh, stderr=subprocess.STDOUT,
            env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        )  # fmt: skip
    served = Served(proc, port, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{served.root}/health").status_code == 200:
                return served
        except httpx.TransportError:
            time.sleep(0.2)
    proc.terminate()
    proc.wait(20)
    raise RuntimeError(f"verigym serve did not start: {log.read_text(errors='replace')}")


def stop_serve(served: Served) -> None:
    served.proc.terminate()
    served.proc.wait(20)


def raw_request(
    port: int,
    method: str,
    path: str,
    headers: list[tuple[str, str]],
    body: bytes = b"",
    *,
    send_all: bool = True,
) -> tuple[int, dict[str, str], bytes]:
    """One request over a plain socket (h11 frames it), for what ordinary clients will not send: a
    body that stops after the first megabyte of a declared 50 MB, say (``send_all=False``). Returns
    the status, headers and body of the response."""
    conn = h11.Connection(h11.CLIENT)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(conn.send(h11.Request(method=method, target=path, headers=[("Host", "x"), *headers])))
        if body:
            sock.sendall(conn.send(h11.Data(data=body)))
        if send_all:
            sock.sendall(conn.send(h11.EndOfMessage()))
        status, head, out = 0, {}, bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = sock.recv(65536)
                conn.receive_data(data)
                if not data and status:
                    break
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
                head = {k.decode().lower(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                out += event.data
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                break
        return status, head, bytes(out)
