"""A warm pool of sandboxed workers: started ahead of time, or handed back after a candidate.

Starting bwrap and an interpreter is most of the cost of grading a small candidate. Where the
grader is not root, the pool starts the next worker on a background thread while the current
candidate runs, so a sequential grader overlaps the two; such a worker has set its limits and
dropped to its own random uid, has seen no code, and serves one candidate only. Where the grader
is root, workers are zygotes (see ``_worker``) that run each candidate under a fresh uid and clean
up after it; a session hands its zygote back (``put``) after a verified clean-up.

The spawning threads live as long as the process (bwrap's ``--die-with-parent`` follows the
thread that started it); pooled workers are killed at exit. ``VERIGYM_SANDBOX_POOL=N`` keeps N
ready workers per configuration (default 2; 0 turns the pool off).
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

__all__ = ["POOL", "Spawned", "WarmPool"]


@dataclass
class Spawned:
    """A started worker that has said it is ready: the process and its cgroup (or None)."""

    proc: Any
    group: Any = None

    def alive(self) -> bool:
        return bool(self.proc.poll() is None)

    def discard(self) -> None:
        from verigym.graders.code._sandbox_io import kill_group

        kill_group(self.proc)
        if self.group is not None:
            self.group.remove()


class WarmPool:
    """At most ``size`` ready workers per configuration key, for the ``max_keys`` most recently
    used configurations (limits, sandbox options)."""

    def __init__(self, size: int | None = None, max_keys: int = 4) -> None:
        env = os.environ.get("VERIGYM_SANDBOX_POOL", "2")
        self.size = size if size is not None else (int(env) if env.isdigit() else 2)
        self.enabled = self.size > 0
        self.max_keys = max_keys
        self._recent: list[Hashable] = []
        self._ready: dict[Hashable, list[Spawned]] = {}
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Hashable, Callable[[], Spawned]] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._inflight: dict[Hashable, int] = {}
        self._spawner: threading.Thread | None = None
        self._spawns: queue.SimpleQueue[tuple[Callable[[], Spawned], Future[Spawned]]] = queue.SimpleQueue()
        atexit.register(self.close)

    def spawn(self, factory: Callable[[], Spawned]) -> Spawned:
        """Run ``factory`` on a thread that lives as long as the process and wait for it: a worker
        that outlives its session (a zygote) must not die with the thread that asked for it, and
        bwrap's ``--die-with-parent`` follows the starting thread."""
        fut: Future[Spawned] = Future()
        with self._lock:
            if self._spawner is None or not self._spawner.is_alive():
                self._spawner = threading.Thread(
                    target=self._spawn_loop, name="verigym-sandbox-spawner", daemon=True
                )
                self._spawner.start()
        self._spawns.put((factory, fut))
        return fut.result()

    def _spawn_loop(self) -> None:
        while True:
            factory, fut = self._spawns.get()
            try:
                fut.set_result(factory())
            except BaseException as exc:  # the caller re-raises it (e.g. SandboxUnavailable)
                fut.set_exception(exc)

    def take(self, key: Hashable) -> Spawned | None:
        """A ready worker for ``key``, or None."""
        with self._lock:
            ready = self._ready.get(key, [])
            while ready:
                got = ready.pop()
                if got.alive():
                    return got
                got.discard()
        return None

    def put(self, key: Hashable, spawned: Spawned) -> None:
        """Take back a reusable worker (a zygote that cleaned up after its candidate): up to one per
        core for each of the ``max_keys`` most recently used configurations."""
        stale: list[Spawned] = []
        with self._lock:
            ready = self._ready.setdefault(key, [])
            if self.enabled and len(ready) < max(self.size, os.cpu_count() or 2) and spawned.alive():
                ready.append(spawned)
                stale = []
            else:
                stale = [spawned]
            self._recent = [k for k in self._recent if k != key] + [key]
            while len(self._recent) > self.max_keys:
                stale += self._ready.pop(self._recent.pop(0), [])
        for old in stale:
            old.discard()

    def refill(self, key: Hashable, factory: Callable[[], Spawned]) -> None:
        """Ask the background threads to start workers for ``key`` until ``size`` are ready or
        on their way (one thread per slot, so spawns overlap on several cores)."""
        if not self.enabled:
            return
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            while len(self._threads) < self.size:
                t = threading.Thread(target=self._run, name="verigym-sandbox-pool", daemon=True)
                t.start()
                self._threads.append(t)
            self._recent = [k for k in self._recent if k != key] + [key]
            stale: list[Spawned] = []
            while len(self._recent) > self.max_keys:  # many configurations: keep the recent ones warm
                stale += self._ready.pop(self._recent.pop(0), [])
            wanted = self.size - len(self._ready.get(key, [])) - self._inflight.get(key, 0)
            self._inflight[key] = self._inflight.get(key, 0) + max(0, wanted)
        for spawned in stale:
            spawned.discard()
        for _ in range(max(0, wanted)):
            self._jobs.put((key, factory))

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            key, factory = job
            try:
                spawned: Spawned | None = factory()
            except Exception:  # the session that needs a worker will start one itself and report why
                spawned = None
            with self._lock:
                self._inflight[key] = max(0, self._inflight.get(key, 0) - 1)
                if spawned is not None and key in self._recent:
                    self._ready.setdefault(key, []).append(spawned)
                    spawned = None
            if spawned is not None:
                spawned.discard()

    def close(self) -> None:
        """Kill every pooled worker (at exit)."""
        with self._lock:
            pooled = [s for ready in self._ready.values() for s in ready]
            self._ready.clear()
        for s in pooled:
            s.discard()


POOL = WarmPool()
