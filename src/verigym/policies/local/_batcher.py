"""The request queue behind ``LocalPolicy.submit``: per-event-loop pending requests, and the running pass
that delivers each row as it finishes and that requests may join (continuous batching)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field

from verigym.policies.local._engine import RowResult, RowSpec

__all__ = ["Live", "Queue", "Request"]


@dataclass
class Request:
    specs: list[RowSpec]
    future: asyncio.Future[list[RowResult]]
    results: dict[int, RowResult] = field(default_factory=dict)


@dataclass
class Live:
    """A running pass that requests may still join (continuous batching) and that delivers per row."""

    adapter: str | None
    loop: asyncio.AbstractEventLoop
    requests: list[Request] = field(default_factory=list)
    inbox: list[Request] = field(default_factory=list)
    owners: dict[int, tuple[Request, int]] = field(default_factory=dict)
    closed: bool = False
    short_only: bool = False  # micro-batching mode: only requests much shorter than the pass's room join
    lock: threading.Lock = field(default_factory=threading.Lock)
    ready: list[Request] = field(default_factory=list)  # complete, waiting for the loop to resolve them
    waking: bool = False  # a resolve_ready call is scheduled on the loop

    def register(self, request: Request) -> None:
        self.requests.append(request)
        self.owners.update({id(s): (request, j) for j, s in enumerate(request.specs)})

    def admit(self, length: int, live: int, room: int, rows: int) -> list[RowSpec]:
        """Requests from the inbox whose prompts fit ``length`` and completions ``room`` tokens, in order,
        while the batch stays within ``rows`` rows. With ``short_only`` a request joins only when its
        ``max_tokens`` is at most a quarter of ``room``: a short request need not wait for a long pass,
        while requests of similar length still wait and form the next micro-batch (measured faster on
        CPU than joining one by one, ``benchmarks/serve_load.py``)."""
        taken: list[RowSpec] = []
        with self.lock:
            for request in list(self.inbox):
                if live + len(taken) + len(request.specs) > rows:
                    break
                limit = room // 4 if self.short_only else room
                if all(len(s.prompt_ids) <= length and s.max_tokens <= limit for s in request.specs):
                    self.inbox.remove(request)
                    self.register(request)
                    taken += request.specs
        return taken

    def deliver(self, spec: RowSpec, result: RowResult) -> None:
        """Record a finished row (generating thread); a complete request waits for ``flush``."""
        request, j = self.owners[id(spec)]
        request.results[j] = result
        if len(request.results) == len(request.specs):
            with self.lock:
                self.ready.append(request)

    def flush(self) -> None:
        """Resolve the complete requests on their loop (generating thread, once per decode step): one
        ``call_soon_threadsafe`` (a syscall and a loop wake-up) per step, not one per request."""
        with self.lock:
            if not self.ready or self.waking:
                return
            self.waking = True
        with contextlib.suppress(RuntimeError):  # the caller's loop has closed
            self.loop.call_soon_threadsafe(self.resolve_ready)

    def resolve_ready(self) -> None:
        """Resolve every complete request now (on the loop)."""
        with self.lock:
            ready, self.ready, self.waking = self.ready, [], False
        for request in ready:
            resolve(request)


def resolve(request: Request) -> None:
    if not request.future.done():
        request.future.set_result([request.results[j] for j in range(len(request.specs))])


@dataclass
class Queue:
    items: list[tuple[Request, str | None]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    live: Live | None = None
