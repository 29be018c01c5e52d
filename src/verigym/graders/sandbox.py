"""Run untrusted commands in a bubblewrap (``bwrap``) sandbox with resource limits.

The sandbox sees a read-only *allow-list* of the host (``/usr``, ``/etc``, the Python install and
whatever the caller binds), never the rest: the project directory, home directories and the
grader's hidden tests do not exist inside. It has no network (own network namespace with only
``lo``), its own pid/ipc/uts namespaces, a private size-limited ``/tmp``, ``/dev`` and ``/proc``,
and runs with every capability dropped. When the grader runs as root the command additionally
switches to a random unprivileged uid, so that ``RLIMIT_NPROC`` (which the kernel does not enforce
for root) stops fork bombs and root-only files stay unreadable.

Limits: wall-clock timeout (the whole process group and pid namespace are killed), CPU seconds,
address space, process count, file size, open files, the size of ``/tmp`` and the bytes of output
kept. ``unsafe_no_sandbox=True`` runs the same command with the rlimits only (no isolation) and must
be an explicit choice of the user (the CLI flag ``--unsafe-no-sandbox``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from verigym.graders._code_cgroup import Cgroup, create_cgroup

__all__ = [
    "Limits",
    "Sandbox",
    "SandboxResult",
    "SandboxUnavailable",
    "python_executable",
    "run_sandboxed",
]

WORKDIR = "/tmp/work"
_SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here: an infrastructure error, never a fail."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run. ``cpu_s`` defaults to the timeout plus one second."""

    timeout_s: float = 10.0
    memory_mb: int = 1024
    max_procs: int = 64
    max_file_mb: int = 64
    max_output_bytes: int = 1_000_000
    max_open_files: int = 256
    tmp_mb: int = 256
    cpu_s: float | None = None

    def cpu_limit(self) -> int:
        return int(self.cpu_s if self.cpu_s is not None else self.timeout_s + 1) + 1


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


def python_executable() -> str:
    """The real interpreter binary behind ``sys.executable`` (a venv's python is a symlink)."""
    return os.path.realpath(sys.executable)


def _python_prefixes() -> list[str]:
    return sorted({os.path.realpath(sys.base_prefix), os.path.dirname(os.path.dirname(python_executable()))})


_probe_lock = threading.Lock()
_probe_result: dict[str, str | None] = {}


class Sandbox:
    """A reusable sandbox configuration.

    ``ro_binds``: extra host paths made visible read-only (a path, or ``(host, inside)``).
    ``writable_dirs``: host directories bound read-write (use sparingly: writes there are real).
    ``network``: keep the host network (off by default).
    ``use_cgroup``: also cap the memory and process count of the whole sandbox with a cgroup when
    the host allows creating one (see ``_code_cgroup``); rlimits apply either way.
    """

    def cgroup(self, limits: Limits) -> Cgroup | None:
        """A fresh cgroup for one sandbox with these limits, or None (not allowed here / disabled)."""
        return create_cgroup(limits.memory_mb, limits.max_procs + 4) if self.use_cgroup else None

    def __init__(
        self,
        *,
        unsafe_no_sandbox: bool = False,
        ro_binds: Sequence[str | tuple[str, str]] = (),
        writable_dirs: Sequence[str | tuple[str, str]] = (),
        network: bool = False,
        bwrap: str | None = None,
        use_cgroup: bool = True,
    ) -> None:
        self.unsafe = unsafe_no_sandbox
        self.use_cgroup = use_cgroup
        self.ro_binds = [(b, b) if isinstance(b, str) else b for b in ro_binds]
        self.writable_dirs = [(b, b) if isinstance(b, str) else b for b in writable_dirs]
        self.network = network
        self.bwrap = bwrap or shutil.which("bwrap")

    # -- availability -------------------------------------------------------------------------
    def check(self) -> None:
        """Raise ``SandboxUnavailable`` unless bwrap can start a sandbox here (probed once)."""
        if self.unsafe:
            return
        if not self.bwrap:
            raise SandboxUnavailable(
                "bubblewrap (bwrap) is not installed: install it (e.g. `apt-get install bubblewrap`) "
                "or pass --unsafe-no-sandbox to run candidate code without isolation"
            )
        with _probe_lock:
            if self.bwrap not in _probe_result:
                _probe_result[self.bwrap] = self._probe()
            problem = _probe_result[self.bwrap]
        if problem:
            raise SandboxUnavailable(
                f"bubblewrap cannot create a sandbox here ({problem}): enable unprivileged user "
                "namespaces or install a setuid bwrap, or pass --unsafe-no-sandbox to run candidate "
                "code without isolation"
            )

    def _probe(self) -> str | None:
        argv, fds = self.argv(["/bin/true"], files={}, limits=Limits(timeout_s=10))
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=20, pass_fds=fds, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        finally:
            for fd in fds:
                os.close(fd)
        if proc.returncode != 0:
            return proc.stderr.decode(errors="replace").strip()[:300] or f"exit code {proc.returncode}"
        return None

    # -- command line -------------------------------------------------------------------------
    def argv(
        self,
        cmd: Sequence[str],
        *,
        files: Mapping[str, str | bytes],
        limits: Limits,
        cwd: str = WORKDIR,
        drop_with: str = "setpriv",
    ) -> tuple[list[str], list[int]]:
        """The full command line and the file descriptors it reads staged files from.

        ``drop_with="setpriv"`` wraps ``cmd`` in ``setpriv`` (uid drop) and ``prlimit`` (rlimits);
        ``drop_with="inprocess"`` keeps CAP_SETUID/CAP_SETGID (when root) and leaves the uid drop
        and the rlimits to ``cmd`` itself, before it runs anything untrusted (the code worker).
        """
        if self.unsafe:
            raise RuntimeError("argv() is for the sandboxed mode")
        assert self.bwrap is not None
        out = [self.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        root = os.geteuid() == 0
        if not root:
            out.append("--unshare-user")
        if not self.network:
            out.append("--unshare-net")
        out += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if root:
            out += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        made: set[str] = {"/"}

        def parents(path: str) -> None:
            parent = os.path.dirname(path.rstrip("/"))
            chain = []
            while parent not in made and parent not in ("", "/"):
                chain.append(parent)
                parent = os.path.dirname(parent)
            for d in reversed(chain):
                out.extend(["--perms", "0755", "--dir", d])
                made.add(d)

        binds: list[tuple[str, str, str]] = []
        for d in _SYSTEM_DIRS:
            if os.path.islink(d):
                out.extend(["--symlink", os.readlink(d), d])
                made.add(d)
            elif os.path.isdir(d):
                binds.append(("--ro-bind", d, d))
        binds += [("--ro-bind", p, p) for p in _python_prefixes() if not p.startswith("/usr/")]
        binds += [("--ro-bind", h, i) for h, i in self.ro_binds]
        binds += [("--bind", h, i) for h, i in self.writable_dirs]
        for flag, host, inside in binds:
            parents(inside)
            out.extend([flag, host, inside])
            made.add(inside)
        for hidden in _HIDDEN_FILES:
            if os.path.exists(hidden):
                out.extend(["--ro-bind", "/dev/null", hidden])
        out += ["--dev", "/dev", "--proc", "/proc"]
        out += ["--size", str(limits.tmp_mb * 1024 * 1024), "--perms", "1777", "--tmpfs", "/tmp"]
        made.add("/tmp")
        fds = _stage_files(out, files, made)
        out += ["--chdir", cwd]
        if drop_with == "setpriv":
            if root:
                uid = str(random_uid())
                out += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
            out += _prlimit_argv(limits)
        out += list(cmd)
        return out, fds

    # -- running ------------------------------------------------------------------------------
    def run(
        self,
        cmd: Sequence[str],
        *,
        files: Mapping[str, str | bytes] | None = None,
        stdin: str | bytes | None = None,
        limits: Limits | None = None,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
    ) -> SandboxResult:
        """Run ``cmd`` to completion (or timeout) and return what it did."""
        limits = limits or Limits()
        files = files or {}
        tmpdir: tempfile.TemporaryDirectory[str] | None = None
        if self.unsafe:
            tmpdir = tempfile.TemporaryDirectory(prefix="verigym-unsafe-")
            for rel, content in files.items():
                _write_host_file(tmpdir.name, rel, content)
            argv, run_cwd = _prlimit_argv(limits) + list(cmd), tmpdir.name
            fds: list[int] = []
        else:
            self.check()
            argv, fds = self.argv(cmd, files=files, limits=limits, cwd=cwd)
            run_cwd = "/"
        stdin_fd = _memfd(b"" if stdin is None else stdin.encode() if isinstance(stdin, str) else stdin)
        base_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}
        group = self.cgroup(limits)
        if group is not None:
            argv = group.wrap(argv)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=stdin_fd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=fds,
                cwd=run_cwd,
                env={**base_env, **(env or {})},
                start_new_session=True,
            )
        except OSError as exc:
            if group is not None:
                group.remove()
            raise SandboxUnavailable(f"could not start the sandbox: {exc}") from exc
        finally:
            os.close(stdin_fd)
            for fd in fds:
                os.close(fd)
        try:
            result = _collect(proc, limits, start)
        finally:
            kill_group(proc)
            if tmpdir is not None:
                tmpdir.cleanup()
            if group is not None:
                oom = group.oom_killed()
                group.remove()
        if group is not None and oom and not result.timed_out:
            result.killed_reason = "out of memory (sandbox memory limit)"
        return result


def run_sandboxed(
    cmd: Sequence[str],
    *,
    files: Mapping[str, str | bytes] | None = None,
    stdin: str | bytes | None = None,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    max_procs: int = 64,
    max_file_mb: int = 64,
    max_output_bytes: int = 1_000_000,
    network: bool = False,
    writable_dirs: Sequence[str | tuple[str, str]] = (),
    ro_binds: Sequence[str | tuple[str, str]] = (),
    unsafe_no_sandbox: bool = False,
    cwd: str = WORKDIR,
    env: Mapping[str, str] | None = None,
) -> SandboxResult:
    """Run ``cmd`` once in a fresh sandbox; ``files`` (relative paths) are placed in ``/tmp/work``.

    Raises ``SandboxUnavailable`` when bwrap is missing or unusable (unless ``unsafe_no_sandbox``).
    """
    box = Sandbox(
        unsafe_no_sandbox=unsafe_no_sandbox, ro_binds=ro_binds, writable_dirs=writable_dirs, network=network
    )
    limits = Limits(
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        max_procs=max_procs,
        max_file_mb=max_file_mb,
        max_output_bytes=max_output_bytes,
    )
    return box.run(cmd, files=files, stdin=stdin, limits=limits, cwd=cwd, env=env)


# -- helpers ----------------------------------------------------------------------------------
def random_uid() -> int:
    """An unused-looking uid for one sandbox, so rlimit process counts are not shared between runs."""
    return 200_000 + secrets.randbelow(800_000)


def _prlimit_argv(limits: Limits) -> list[str]:
    mem = limits.memory_mb * 1024 * 1024
    fsize = limits.max_file_mb * 1024 * 1024
    return [
        "prlimit",
        f"--cpu={limits.cpu_limit()}",
        f"--as={mem}",
        f"--nproc={limits.max_procs}",
        f"--fsize={fsize}",
        f"--nofile={limits.max_open_files}",
        "--core=0",
        "--",
    ]


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("verigym", 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _stage_files(out: list[str], files: Mapping[str, str | bytes], made: set[str]) -> list[int]:
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
        fd = _memfd(content.encode() if isinstance(content, str) else content)
        fds.append(fd)
        out.extend(["--perms", "0666", "--file", str(fd), dest])
    return fds


def _write_host_file(root: str, rel: str, content: str | bytes) -> None:
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


def _collect(proc: subprocess.Popen[bytes], limits: Limits, start: float) -> SandboxResult:
    """Read stdout/stderr (capped) until both close or the deadline passes."""
    deadline = start + limits.timeout_s
    cap = limits.max_output_bytes
    bufs = {"stdout": bytearray(), "stderr": bytearray()}
    truncated = {"stdout": False, "stderr": False}
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
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
            room = cap - len(bufs[name])
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
    )
