"""Worker threads for sync graders: ``in_thread(fn, *args)`` is a future of ``fn(*args)`` run off the loop.

What ``loop.run_in_executor(None, ...)`` does, for many short calls: the calls that finish while
the event loop is busy are handed back together, with one wake-up of the loop for the batch
(``call_soon_threadsafe`` writes to the loop's self-pipe) instead of one per call, and the loop's
future is resolved directly (no ``concurrent.futures.Future`` wrapped in an asyncio one).

A call that hangs keeps its thread; the others go on in more threads (up to ``MAX_WORKERS``, as
the default executor), and the awaiting side can stop waiting with ``asyncio.wait_for``. The
threads are started when needed and live as long as the process (a sandbox started with bwrap's
``--die-with-parent`` follows the thread that started it), as daemons: a grader that never returns
cannot hold the process open at exit the way a default-executor thread holds ``asyncio.run``.

The other way round, async code called from sync code: ``run_blocking(coro)`` runs a coroutine to
completion on an event loop of its own; when the calling thread already runs a loop (a notebook, an
async caller), that loop is left alone and the coroutine's loop runs in a worker thread instead.
``blocking(afn, name, doc)`` is the sync twin of an async function: the same parameters (to the
type checker too), the result of ``run_blocking(afn(...))``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import queue
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

__all__ = ["MAX_WORKERS", "blocking", "in_thread", "run_blocking"]

P = ParamSpec("P")
T = TypeVar("T")
MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)  # the default executor's size

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]
_Done = tuple["asyncio.Future[Any]", Any, BaseException | None]


class _Pool:
    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a forked child has none of the threads

    def _reset(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._done: dict[asyncio.AbstractEventLoop, list[_Done]] = {}  # per loop, waiting for its drain

    def submit(self, loop: asyncio.AbstractEventLoop, call: Callable[[], Any]) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            # ``_idle``: threads waiting for work minus jobs queued for them
            spawn = self._idle <= 0 and self._threads < MAX_WORKERS
            if spawn:
                self._threads += 1
            else:
                self._idle -= 1  # an idle thread takes it, or it waits for the first one free
        self._jobs.put((loop, future, call))
        if spawn:
            threading.Thread(target=self._work, name="verigym-grader", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            loop, future, call = self._jobs.get()
            try:
                result, error = call(), None
            except BaseException as exc:  # handed to the awaiting side, like an executor does
                result, error = None, exc
            with self._lock:
                pending = self._done.setdefault(loop, [])
                pending.append((future, result, error))
                first = len(pending) == 1
                self._idle += 1
            if first:
                try:
                    loop.call_soon_threadsafe(self._drain, loop)
                except RuntimeError:  # the loop was closed meanwhile: nobody awaits these any more
                    with self._lock:
                        self._done.pop(loop, None)

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            finished = self._done.pop(loop, [])
        for future, result, error in finished:
            if future.cancelled():  # the caller timed out or was cancelled
                continue
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)


_POOL = _Pool()


def in_thread(fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """A future of the running loop resolved with ``fn(*args)`` run in a worker thread, in the
    caller's context (as ``asyncio.to_thread``). Cancelling it stops the wait, not the call."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return _POOL.submit(asyncio.get_running_loop(), call)


def run_blocking(coro: Coroutine[Any, Any, T], thread_name: str = "verigym-blocking") -> T:
    """``coro``'s result, on an event loop of its own (in a worker thread named ``thread_name`` when
    this thread runs one); its exception propagates."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1, thread_name_prefix=thread_name) as pool:
        return pool.submit(asyncio.run, coro).result()


def blocking(afn: Callable[P, Coroutine[Any, Any, T]], name: str, doc: str) -> Callable[P, T]:
    """A function named ``name`` (in ``afn``'s module) that takes ``afn``'s arguments and returns
    ``run_blocking(afn(...))``; ``doc`` is its docstring."""

    @functools.wraps(afn)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_blocking(afn(*args, **kwargs), thread_name=f"verigym-{name}")

    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    return run
