"""The request queue behind ``LocalPolicy.submit``: per-event-loop pending requests, and the running pass
that delivers each row as it finishes and that requests may join (continuous batching).

``QueueMixin`` is the half of ``LocalPolicy`` that uses them (``submit`` and the task that drains a
loop's queue into passes); ``PassHooks`` are the continuous-batching hooks a pass is run with.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

from verigym.policies.base import PolicyError
from verigym.policies.local._engine import RowResult, RowSpec
from verigym.policies.local._lora import AS_IS

__all__ = ["Live", "PassHooks", "Queue", "QueueMixin", "Request"]


class PassHooks(TypedDict, total=False):
    """The continuous-batching hooks of ``run_rows`` (see there), for the callers that pass them on."""

    admit: Callable[[int, int, int], list[RowSpec]] | None
    deliver: Callable[[RowSpec, RowResult], None] | None
    headroom: float
    flush: Callable[[], None] | None
    stop: threading.Event | None


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
        while requests of similar length still wait and form the next micro-batch."""
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


class QueueMixin:
    """The micro-batching half of ``LocalPolicy``: ``submit`` and the per-loop task that drains its queue."""

    batch_wait_s: float
    continuous: bool
    max_batch_rows: int
    _queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Queue]

    def run(
        self, specs: Sequence[RowSpec], adapter: str | None = AS_IS, **hooks: Unpack[PassHooks]
    ) -> list[RowResult]:
        raise NotImplementedError

    async def submit(self, specs: list[RowSpec], adapter: str | None = AS_IS) -> list[RowResult]:
        """Queue rows for generation on this event loop and await their results: they join the running
        pass when they can (continuous batching), else the next micro-batched pass."""
        loop = asyncio.get_running_loop()
        queue = self._queues.setdefault(loop, Queue())
        request = Request(specs, loop.create_future())
        live = queue.live
        joined = False
        if live is not None and live.adapter == adapter:  # it joins if it fits (see ``Live.admit``)
            with live.lock:
                if not live.closed:
                    live.inbox.append(request)
                    joined = True
        if not joined:
            queue.items.append((request, adapter))
            if queue.task is None or queue.task.done():
                queue.task = loop.create_task(self._drain(queue))
        return await request.future

    async def _drain(self, queue: Queue) -> None:
        loop = asyncio.get_running_loop()
        while queue.items:
            await asyncio.sleep(self.batch_wait_s)  # let callers scheduled together enqueue first
            items, queue.items = queue.items, []
            for adapter in dict.fromkeys(a for _, a in items):
                live = queue.live = Live(adapter, loop, short_only=not self.continuous)
                for request, a in items:
                    if a == adapter:
                        live.register(request)
                flat = [s for r in live.requests for s in r.specs]

                def admit(length: int, n_live: int, room: int, live: Live = live) -> list[RowSpec]:
                    return live.admit(length, n_live, room, self.max_batch_rows)

                stop = threading.Event()
                try:
                    await asyncio.to_thread(
                        self.run,
                        flat,
                        adapter,
                        admit=admit,
                        deliver=live.deliver,
                        headroom=1.0 if self.continuous else 0.25,
                        flush=live.flush,
                        stop=stop,
                    )
                except asyncio.CancelledError:
                    stop.set()  # a thread cannot be cancelled: the pass ends at its next decode step
                    raise
                except Exception as exc:
                    live.resolve_ready()  # rows that finished before the failure keep their results
                    err = exc if isinstance(exc, PolicyError) else PolicyError("local_model", f"{exc}")
                    for request in live.requests:
                        if not request.future.done():
                            request.future.set_exception(err)
                finally:
                    live.resolve_ready()
                    queue.live = None
                    with live.lock:
                        live.closed = True
                        queue.items += [(r, adapter) for r in live.inbox]
