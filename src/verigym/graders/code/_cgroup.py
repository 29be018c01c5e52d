"""Optional per-sandbox cgroup: one memory and process budget for *all* of a sandbox's processes.

rlimits are per process (a fork bomb of 64 processes × 1 GiB each is still 64 GiB); a cgroup caps
the sum. Used when the grader may create cgroups (root on cgroup v1 or a delegated v2 tree), nested
under the grader's own cgroup so it stays inside whatever budget the grader itself has; otherwise
the sandbox falls back to rlimits alone. The sandboxed command joins the cgroup before ``exec``
through a one-line ``sh`` wrapper (no ``preexec_fn``, so it is safe from threads).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import threading
import time
from pathlib import Path

__all__ = ["Cgroup", "create_cgroup"]

_ROOT = Path("/sys/fs/cgroup")


def _own_path(controller: str) -> str:
    """This process's cgroup path for ``controller`` ('' on cgroup v2 = the unified entry)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "/"
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if controller in ctrls.split(",") or (controller == "" and ctrls == ""):
            return path
    return "/"


class Cgroup:
    """A created cgroup (one directory per controller); ``wrap`` prefixes a command to join it."""

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs

    def wrap(self, argv: list[str]) -> list[str]:
        joins = " && ".join(f"echo $$ > {d / 'cgroup.procs'}" for d in self.dirs)
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sh", *argv]

    def oom_killed(self) -> bool:
        for d in self.dirs:
            for name, key in (("memory.oom_control", "oom_kill "), ("memory.events", "oom_kill ")):
                with contextlib.suppress(OSError, ValueError):
                    for line in (d / name).read_text().splitlines():
                        if line.startswith(key) and int(line.split()[1]) > 0:
                            return True
        return False

    def remove(self) -> None:
        """Remove the cgroup; while its killed processes are still exiting, a reaper thread retries."""
        busy = []
        for d in self.dirs:
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                busy.append(d)
        if busy:
            _REAPER.add(busy)


class _Reaper:
    """Retries ``rmdir`` of cgroups whose processes were killed but have not exited yet."""

    def __init__(self) -> None:
        self._pending: list[tuple[float, Path]] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        atexit.register(self.flush)

    def add(self, dirs: list[Path]) -> None:
        with self._lock:
            self._pending += [(time.monotonic() + 30, d) for d in dirs]
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="verigym-cgroup-reaper", daemon=True)
                self._thread.start()
        self._wake.set()

    def _sweep(self) -> bool:
        with self._lock:
            keep = []
            for until, d in self._pending:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    if time.monotonic() < until:
                        keep.append((until, d))
            self._pending = keep
            return bool(keep)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while self._sweep():
                time.sleep(0.05)

    def flush(self) -> None:
        for _ in range(40):
            if not self._sweep():
                return
            time.sleep(0.05)


_REAPER = _Reaper()


def _v1(memory_bytes: int, max_procs: int, name: str) -> Cgroup | None:
    mem = _ROOT / "memory" / _own_path("memory").lstrip("/") / name
    pids = _ROOT / "pids" / _own_path("pids").lstrip("/") / name
    made: list[Path] = []
    try:
        for d in (mem, pids):
            d.mkdir()
            made.append(d)
        (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
        with contextlib.suppress(OSError):
            (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        (pids / "pids.max").write_text(str(max_procs))
    except OSError:
        Cgroup(made).remove()
        return None
    return Cgroup(made)


def _v2(memory_bytes: int, max_procs: int, name: str) -> Cgroup | None:
    d = _ROOT / _own_path("").lstrip("/") / name
    try:
        d.mkdir()
    except OSError:
        return None
    try:
        (d / "memory.max").write_text(str(memory_bytes))
        with contextlib.suppress(OSError):
            (d / "memory.swap.max").write_text("0")
        (d / "pids.max").write_text(str(max_procs))
    except OSError:
        Cgroup([d]).remove()
        return None
    return Cgroup([d])


_disabled = False
_swept = False


def _sweep_stale(parents: list[Path]) -> None:
    """Remove empty ``verigym-<pid>-*`` cgroups left by grader processes that died."""
    for parent in parents:
        with contextlib.suppress(OSError):
            for d in parent.glob("verigym-*-*"):
                pid = d.name.split("-")[1]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    with contextlib.suppress(OSError):
                        d.rmdir()


def create_cgroup(memory_mb: int, max_procs: int) -> Cgroup | None:
    """A fresh cgroup with these budgets, or None when this host does not let us make one."""
    global _disabled, _swept
    if _disabled or os.environ.get("VERIGYM_NO_CGROUP"):
        return None
    if not _swept:
        _swept = True
        parents = [_ROOT / c / _own_path(c).lstrip("/") for c in ("memory", "pids")]
        _sweep_stale([*parents, _ROOT / _own_path("").lstrip("/")])
    name = f"verigym-{os.getpid()}-{secrets.token_hex(4)}"
    memory_bytes = memory_mb * 1024 * 1024
    if (_ROOT / "memory").is_dir() and (_ROOT / "pids").is_dir():
        group = _v1(memory_bytes, max_procs, name)
    elif (_ROOT / "cgroup.controllers").exists():
        group = _v2(memory_bytes, max_procs, name)
    else:
        group = None
    if group is None:
        _disabled = True  # do not retry on every sandbox
    return group
