"""Slow clients beside ``benchmarks/soak.py``'s serve load (issue 42 item 5): connections that never
finish a request, reopened as the server cuts them at its read deadlines, and a ``/health`` prober."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections import Counter
from typing import Any

import httpx

__all__ = ["SlowClients"]


class SlowClients:
    """``n`` connections that never finish a request (half stall in their headers, half trickle a body),
    each reopened when the server cuts it; and a ``/health`` prober beside them."""

    def __init__(self, load: Any, n: int) -> None:
        self.load, self.n = load, n
        self.counts: Counter[str] = Counter()
        self.held_max_s = 0.0
        self.health_ms: list[float] = []
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._slow, daemon=True),
            threading.Thread(target=self._probe, daemon=True),
        ]

    def _open(self, i: int) -> socket.socket | None:
        port = int(self.load.url.rsplit(":", 1)[1].split("/")[0])
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            sock.sendall((head + "Content-Length: 100000\r\n\r\n[" if i % 2 else head).encode())
        except OSError:
            self.counts["open_failed"] += 1
            return None
        sock.setblocking(False)
        self.counts["opened"] += 1
        return sock

    def _slow(self) -> None:
        sel = selectors.DefaultSelector()
        since: dict[int, float] = {}
        got: dict[int, bytes] = {}
        socks: dict[int, socket.socket] = {}
        while not self.stop.is_set():
            for i in range(self.n):
                if i not in socks and (sock := self._open(i)) is not None:
                    socks[i], since[i], got[i] = sock, time.monotonic(), b""
                    sel.register(sock, selectors.EVENT_READ, i)
            for i, sock in socks.items():
                with contextlib.suppress(OSError):
                    sock.send(b" " if i % 2 else b"X-Slow: 1\r\n")
            end = time.monotonic() + 1.0
            while (left := end - time.monotonic()) > 0:
                for key, _ in sel.select(timeout=left):
                    i = int(key.data)
                    try:
                        chunk = socks[i].recv(4096)
                    except BlockingIOError:
                        continue
                    except OSError:
                        chunk = b""
                    if chunk:
                        got[i] += chunk
                        continue
                    sel.unregister(socks[i])
                    socks.pop(i).close()
                    self.held_max_s = max(self.held_max_s, time.monotonic() - since[i])
                    self.counts["cut"] += 1
                    self.counts["cut_408" if got[i].startswith(b"HTTP/1.1 408") else "cut_silent"] += 1
        for sock in socks.values():
            sock.close()

    def _probe(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                t = time.monotonic()
                try:
                    r = client.get(self.load.url.removesuffix("/v1") + "/health")
                    ok = r.status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.health_ms.append((time.monotonic() - t) * 1000)
                self.counts["health_ok" if ok else "health_failed"] += 1
                time.sleep(0.5)

    def report(self) -> dict[str, Any]:
        ms = sorted(self.health_ms) or [0.0]
        return {
            **dict(self.counts),
            "held_max_s": round(self.held_max_s, 1),
            "health_p50_ms": round(ms[len(ms) // 2], 1),
            "health_p99_ms": round(ms[int(len(ms) * 0.99)], 1),
            "health_max_ms": round(ms[-1], 1),
        }
