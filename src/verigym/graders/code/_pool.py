"""A warm pool of sandboxed workers: started ahead of time, or handed back after a candidate.

Starting bwrap and an interpreter is most of the cost of grading a small candidate. Where the
grader is not root, the pool starts the next worker on a background thread while the current
candidate runs, so a sequential grader overlaps the two; such a worker has set its limits and
dropped to its own random uid, has seen no code, and serves one candidate only. Where the grader
is root, workers are zygotes (see ``_worker``) that run each candidate under a fresh uid and clean
up after it; a session hands its zygote back (``give_back``): the clean-up and its verification
run on a background thread, off the grader's path, and the next ``take`` of that configuration
waits for it rather than starting a new sandbox.

The spawning threads live as long as the process (bwrap's ``--die-with-parent`` follows the
thread that started it); pooled workers are killed at exit. ``VERIGYM_SANDBOX_POOL=N`` keeps N
ready workers per configuration (default 2; 0 turns the pool off).
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
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
        self._changed = threading.Condition(self._lock)
        self._resetting: dict[Hashable, int] = {}
        self._waiting: dict[Hashable, int] = {}
        self._family: dict[Hashable, list[Spawned]] = {}  # every reusable worker started per key
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

    def take(self, key: Hashable, wait_s: float = 2.0) -> Spawned | None:
        """A ready worker for ``key``, or None. While a worker of ``key`` is being reset after its
        candidate (``give_back``), wait up to ``wait_s`` for it: a reset takes milliseconds, a
        new sandbox much longer."""
        deadline = time.monotonic() + wait_s
        dead: list[Spawned] = []
        with self._changed:
            while True:
                ready = self._ready.get(key, [])
                while ready:
                    got = ready.pop()
                    if got.alive():
                        break
                    dead.append(got)
                else:
                    got = None
                left = deadline - time.monotonic()
                # wait only for a worker no other waiter is already waiting for
                if got is not None or self._waiting.get(key, 0) >= self._resetting.get(key, 0) or left <= 0:
                    break
                self._waiting[key] = self._waiting.get(key, 0) + 1
                self._changed.wait(left)
                self._waiting[key] -= 1
        for old in dead:
            old.discard()
        return got

    def register(self, key: Hashable, spawned: Spawned) -> None:
        """Count ``spawned`` as one of ``key``'s reusable workers (see ``ensure``)."""
        with self._lock:
            self._family.setdefault(key, []).append(spawned)

    def ensure(self, key: Hashable, factory: Callable[[], Spawned]) -> None:
        """Keep one reusable worker of ``key`` spare beyond those in use (at least ``size``, at
        most one per core plus one), started in the background: while one is reset after its
        candidate, the next candidate takes another instead of waiting."""
        if not self.enabled:
            return
        with self._lock:
            family = self._family[key] = [s for s in self._family.get(key, []) if s.alive()]
            spare = len(self._ready.get(key, [])) + self._resetting.get(key, 0)
            in_use = len(family) - spare
            cap = max(self.size, os.cpu_count() or 2) + 1
            target = min(cap, max(self.size, in_use + 1))
            wanted = target - len(family) - self._inflight.get(key, 0)
        if wanted > 0:

            def make() -> Spawned:
                spawned = factory()
                self.register(key, spawned)
                return spawned

            self.refill(key, make, wanted)

    def give_back(self, key: Hashable, spawned: Spawned, reset: Callable[[], bool]) -> None:
        """Reset a used worker off the caller's path: ``reset()`` (on a background thread) says
        whether it came back clean; then it goes back to the pool, else it is discarded."""
        with self._lock:
            self._resetting[key] = self._resetting.get(key, 0) + 1
        threading.Thread(
            target=self._reset, args=(key, spawned, reset), name="verigym-sandbox-reset", daemon=True
        ).start()

    def _reset(self, key: Hashable, spawned: Spawned, reset: Callable[[], bool]) -> None:
        try:
            clean = reset()
        except Exception:  # a worker that cannot prove it is clean is not reused
            clean = False
        if clean:
            self.put(key, spawned)
        else:
            spawned.discard()
        with self._changed:
            self._resetting[key] = max(0, self._resetting.get(key, 0) - 1)
            self._changed.notify_all()

    def put(self, key: Hashable, spawned: Spawned) -> None:
        """Take back a reusable worker (a zygote that cleaned up after its candidate): up to one per
        core for each of the ``max_keys`` most recently used configurations."""
        stale: list[Spawned] = []
        with self._lock:
            ready = self._ready.setdefault(key, [])
            if self.enabled and len(ready) < max(self.size, os.cpu_count() or 2) and spawned.alive():
                ready.append(spawned)
                stale = []
                self._changed.notify_all()
            else:
                stale = [spawned]
            self._recent = [k for k in self._recent if k != key] + [key]
            while len(self._recent) > self.max_keys:
                stale += self._ready.pop(self._recent.pop(0), [])
        for old in stale:
            old.discard()

    def refill(self, key: Hashable, factory: Callable[[], Spawned], count: int | None = None) -> None:
        """Ask the background threads to start workers for ``key`` until ``size`` are ready or
        on their way (one thread per slot, so spawns overlap on several cores); ``count``: start
        that many instead."""
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
            if count is not None:
                wanted = count
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
                    self._changed.notify_all()
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
