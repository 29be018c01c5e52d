"""Hard per-check timeout for the math grader: a pool of persistent worker processes.

sympy can run for minutes (``2^{2^{100}}``, pathological ``simplify``) and cannot be interrupted
from another thread, and ``signal.alarm`` only works on the main thread of the main process.
So each check runs in a long-lived worker process (spawned once; imports and parse caches stay
warm); the caller waits on a pipe with a deadline and, past it, kills the worker and starts a
fresh one. Works from any thread and any process. A worker that dies mid-check is reported as
an error too, never as a rejection.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

__all__ = ["WARMUP", "CheckCrashed", "CheckTimeout", "WorkerPool", "default_pool"]

_STARTUP_S = 120.0
_HEADER = struct.Struct("!I")
_CLEAR = ("__clear_caches__",)  # a frame that empties the worker's parse caches


class CheckTimeout(Exception):
    """The check ran past its deadline; its worker was killed."""


class CheckCrashed(Exception):
    """The check raised inside the worker, or the worker died."""


def _write(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    buf = b""
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def _read(fd: int, deadline: float | None) -> Any:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return pickle.loads(_read_exact(fd, size, deadline))


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when its parent dies, even mid-computation."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _serve() -> None:
    """Worker main loop: read (gold, pred, mode, question) frames, answer with verdict frames."""
    _die_with_parent()
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # nothing the check prints can corrupt the protocol
    from verigym.graders.math._sympy_path._check import check

    _preload()
    _warm(check)
    _write(out, ("ready", None))
    fd = sys.stdin.fileno()
    while True:
        try:
            args = _read(fd, None)
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = ("ok", _clear()) if args == _CLEAR else ("ok", check(*args))
        except Exception as exc:  # reported to the caller as an errored verdict
            reply = ("error", f"{type(exc).__name__}: {exc}")
        _write(out, reply)


WARMUP = (  # one check of each common kind: sympy's first use of each costs up to ~0.3 s
    ("x^2 - 1", "(x-1)(x+1)"),
    ("x < 1", "-x > -1"),
    ("f(x) = 2x", "f(x) = x"),
    ("\\frac{\\sqrt{2}}{2}", "0.7071"),
    ("(1, 2]", "1 < x \\le 2"),
    ("\\sin^2 x + \\cos^2 x", "1"),
    ("2 \\arcsin \\sqrt{a}", "\\arccos(1 - 2a)"),
)


def _preload() -> None:
    """Import now what sympy imports on first use inside a check: ``simplify`` imports
    ``sympy.physics.units`` (0.3-0.5 s) the first time it gets past its early returns, which
    would otherwise land on whichever check first needs it."""
    import sympy.physics.units  # noqa: F401


def _warm(check: Any) -> None:
    """Run the warm-up checks once, so a started worker answers its first real check at speed."""
    for gold, pred in WARMUP:
        with contextlib.suppress(Exception):
            check(gold, pred)
    _clear()


def _clear() -> bool:
    from verigym.graders.math._demanded._forms import clear_form_caches
    from verigym.graders.math._shared._rules import clear_rule_caches
    from verigym.graders.math._sympy_path._parse import parse
    from verigym.graders.math._sympy_path._values import clear_value_caches

    clear_rule_caches()
    clear_form_caches()
    parse.cache_clear()
    clear_value_caches()
    return True


_SPAWNER: ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> ThreadPoolExecutor:
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="verigym-math-spawner")
        return _SPAWNER


class _Worker:
    def __init__(self) -> None:
        env = dict(os.environ)
        # The worker imports verigym exactly as this process does (source trees, edited sys.path).
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        # Started from one long-lived thread: the kernel's parent-death signal fires when the
        # *thread* that started a child exits, and callers' threads come and go.
        self.proc = (
            _spawner()
            .submit(
                subprocess.Popen,
                # -c, not -m: the package imports this module first, and runpy would then run a second copy
                [
                    sys.executable,
                    "-c",
                    "from verigym.graders.math._sympy_path._worker import _serve; _serve()",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
            .result()
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._in, self._out = self.proc.stdin, self.proc.stdout.fileno()
        try:
            _read(self._out, time.monotonic() + _STARTUP_S)
        except (TimeoutError, EOFError, OSError) as exc:
            self.kill()
            raise CheckCrashed("math worker did not start") from exc

    def call(self, args: tuple[Any, ...], timeout: float) -> Any:
        try:
            _write(self._in, args)
            kind, payload = _read(self._out, time.monotonic() + timeout)
        except TimeoutError:
            self.kill()
            raise CheckTimeout(f"check took longer than {timeout:g}s") from None
        except (EOFError, OSError) as exc:
            self.kill()
            raise CheckCrashed(f"math worker died (exit code {self.proc.poll()})") from exc
        if kind == "error":
            raise CheckCrashed(str(payload))
        return payload

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class WorkerPool:
    """Up to ``size`` worker processes shared by all threads of this process."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size or max(2, min(16, os.cpu_count() or 1))  # started lazily, one per concurrent check
        self._idle: list[_Worker] = []
        self._count = 0
        self._cond = threading.Condition()

    def _acquire(self) -> _Worker:
        with self._cond:
            while True:
                while self._idle:
                    w = self._idle.pop()
                    if w.alive:
                        return w
                    self._count -= 1
                if self._count < self.size:
                    self._count += 1
                    break
                self._cond.wait()
        try:
            return _Worker()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _release(self, w: _Worker) -> None:
        with self._cond:
            if w.alive:
                self._idle.append(w)
            else:
                self._count -= 1
            self._cond.notify()

    def run(self, args: tuple[Any, ...], timeout: float) -> Any:
        """Run ``check(*args)`` in a worker; raises ``CheckTimeout`` or ``CheckCrashed``."""
        w = self._acquire()
        try:
            return w.call(args, timeout)
        finally:
            self._release(w)

    def clear_caches(self) -> None:
        """Empty the parse caches of every idle worker (busy ones keep theirs)."""
        with self._cond:
            idle, self._idle = self._idle, []
        for w in idle:
            with contextlib.suppress(CheckTimeout, CheckCrashed):  # a dead worker has no caches
                w.call(_CLEAR, _STARTUP_S)
            self._release(w)

    def warm(self, n: int = 1) -> None:
        """Start ``n`` workers now (at most ``size``), so timed checks do not pay for the imports."""
        held = [self._acquire() for _ in range(max(1, min(n, self.size)))]
        for w in held:
            self._release(w)

    def close(self) -> None:
        with self._cond:
            for w in self._idle:
                w.kill()
            self._count -= len(self._idle)
            self._idle.clear()


_POOL: WorkerPool | None = None
_POOL_PID = 0
_POOL_LOCK = threading.Lock()


def default_pool() -> WorkerPool:
    """The process-wide pool (created on first use, closed at exit). A forked child gets its own:
    it must not share the parent's pipes."""
    global _POOL, _POOL_PID, _SPAWNER
    with _POOL_LOCK:
        if _POOL is None or os.getpid() != _POOL_PID:
            if _POOL is not None:  # a forked child: the parent's spawner thread does not exist here
                _SPAWNER = None
            _POOL, _POOL_PID = WorkerPool(), os.getpid()
            atexit.register(_POOL.close)
        return _POOL


if __name__ == "__main__":
    _serve()
