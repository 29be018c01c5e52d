"""Plumbing of the sandbox: limits, results, staging files, rlimits, output collection, killing."""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "WORKDIR",
    "Limits",
    "SandboxResult",
    "SandboxUnavailable",
    "collect",
    "kill_group",
    "memfd",
    "nproc_limit",
    "prlimit_argv",
    "random_uid",
    "stage_files",
    "write_host_file",
]

WORKDIR = "/tmp/work"


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here: an infrastructure error, never a fail."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run.

    For the code worker, ``timeout_s`` is a per-case budget of *CPU* seconds (``cpu_s`` defaults to
    it; ``RLIMIT_CPU`` counts whole seconds, so it is rounded up), so a loaded machine does not fail
    correct code while a spinning case costs no more than ``timeout_s`` of CPU; ``wall_s``
    (default ``3 * timeout_s + 2``) is the wall-clock backstop for code that sleeps or blocks.
    ``max_result_bytes`` bounds one function result as sent by the sandbox (64 MiB: a list of
    millions of numbers); ``max_output_bytes`` bounds printed output.
    """

    timeout_s: float = 10.0
    memory_mb: int = 1024
    max_procs: int = 64
    max_file_mb: int = 64
    max_output_bytes: int = 1_000_000
    max_open_files: int = 256
    tmp_mb: int = 256
    cpu_s: float | None = None
    wall_s: float | None = None
    max_result_bytes: int = 64 * 1024 * 1024

    def cpu_limit(self) -> int:
        return max(1, math.ceil(self.cpu_s if self.cpu_s is not None else self.timeout_s))

    def wall_limit(self) -> float:
        return float(self.wall_s if self.wall_s is not None else 3 * self.timeout_s + 2)


@dataclass
class SandboxResult:
    """What a sandboxed command did. ``killed_reason`` says why it was stopped (``timeout``...)."""

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    killed_reason: str | None = None
    wall_s: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    events: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.killed_reason is None


def random_uid() -> int:
    """An unused-looking uid for one sandbox, so rlimit process counts are not shared between runs."""
    return 200_000 + secrets.randbelow(800_000)


def nproc_limit(max_procs: int, fresh_uid: bool) -> int:
    """RLIMIT_NPROC for a sandbox. It counts every process of the real uid: exact when the sandbox
    runs as a fresh uid (root drops to a random one), else the user's current count plus the budget."""
    if fresh_uid:
        return max_procs
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                count += entry.stat(follow_symlinks=False).st_uid == uid
    return count + max_procs


def prlimit_argv(limits: Limits, fresh_uid: bool | None = None) -> list[str]:
    """``prlimit --cpu=... --`` for the command (nothing where util-linux's prlimit is missing:
    only the unsafe mode can get there, since every bwrap host has it)."""
    if shutil.which("prlimit") is None:
        return []
    mem = limits.memory_mb * 1024 * 1024
    fsize = limits.max_file_mb * 1024 * 1024
    return [
        "prlimit",
        f"--cpu={limits.cpu_limit()}",
        f"--as={mem}",
        f"--nproc={nproc_limit(limits.max_procs, os.geteuid() == 0 if fresh_uid is None else fresh_uid)}",
        f"--fsize={fsize}",
        f"--nofile={limits.max_open_files}",
        "--core=0",
        "--",
    ]


def memfd(data: bytes) -> int:
    """A readable descriptor holding ``data`` (an anonymous file; no name on any disk)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("verigym", 0)
    else:  # not Linux: an unlinked temporary file
        fd, path = tempfile.mkstemp(prefix="verigym-")
        os.unlink(path)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def stage_files(out: list[str], files: Mapping[str, str | bytes], made: set[str]) -> list[int]:
    fds: list[int] = []
    out.extend(["--perms", "0777", "--dir", WORKDIR])
    made.add(WORKDIR)
    for rel in sorted(files):
        norm = os.path.normpath(rel)
        if norm.startswith(("/", "..")) or norm == ".":
            raise ValueError(f"sandbox file path must be relative and stay inside the workdir, got {rel!r}")
        dest = f"{WORKDIR}/{norm}"
        parent = os.path.dirname(dest)
        chain = []
        while parent not in made:
            chain.append(parent)
            parent = os.path.dirname(parent)
        for d in reversed(chain):
            out.extend(["--perms", "0777", "--dir", d])
            made.add(d)
        content = files[rel]
        fd = memfd(content.encode() if isinstance(content, str) else content)
        fds.append(fd)
        out.extend(["--perms", "0666", "--file", str(fd), dest])
    return fds


def write_host_file(root: str, rel: str, content: str | bytes) -> None:
    norm = os.path.normpath(rel)
    if norm.startswith(("/", "..")):
        raise ValueError(f"file path must be relative and stay inside the workdir, got {rel!r}")
    path = os.path.join(root, norm)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(content.encode() if isinstance(content, str) else content)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group of ``proc`` (bwrap's pid namespace dies with it) and reap it."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def collect(
    proc: subprocess.Popen[bytes], limits: Limits, start: float, events_fd: int | None = None
) -> SandboxResult:
    """Read stdout/stderr (capped) and the event log until all close or the deadline passes."""
    deadline = start + limits.timeout_s
    caps = {"stdout": limits.max_output_bytes, "stderr": limits.max_output_bytes, "events": 65536}
    bufs = {"stdout": bytearray(), "stderr": bytearray(), "events": bytearray()}
    truncated = {"stdout": False, "stderr": False, "events": False}
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    if events_fd is not None:
        sel.register(events_fd, selectors.EVENT_READ, "events")
    timed_out = False
    exited_at: float | None = None
    while sel.get_map():
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > 0.5:
            break  # the main process is gone; leftover children hold the pipes open
        for key, _ in sel.select(timeout=min(0.1, max(0.0, deadline - now))):
            chunk = os.read(key.fd, 65536)
            name = str(key.data)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            room = caps[name] - len(bufs[name])
            if room > 0:
                bufs[name] += chunk[:room]
            if len(chunk) > room:
                truncated[name] = True
    sel.close()
    if timed_out:
        kill_group(proc)
    else:
        try:
            proc.wait(timeout=max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
    code = proc.returncode
    reason: str | None = None
    if timed_out:
        reason = f"timeout after {limits.timeout_s:g}s"
    elif code is not None and code < 0:
        reason = f"killed by signal {signal.Signals(-code).name}" if -code in signal.valid_signals() else None
    return SandboxResult(
        exit_code=None if timed_out else code,
        stdout=bytes(bufs["stdout"]).decode(errors="replace"),
        stderr=bytes(bufs["stderr"]).decode(errors="replace"),
        timed_out=timed_out,
        killed_reason=reason,
        wall_s=time.monotonic() - start,
        stdout_truncated=truncated["stdout"],
        stderr_truncated=truncated["stderr"],
        events=[ln for ln in bytes(bufs["events"]).decode(errors="replace").splitlines() if ln.strip()][:100],
    )
