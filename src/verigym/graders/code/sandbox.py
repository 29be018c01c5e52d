"""Run untrusted commands in a bubblewrap (``bwrap``) sandbox with resource limits.

The sandbox sees a read-only *allow-list* of the host (``/usr``, ``/etc``, the Python install's
interpreter and standard library, and whatever the caller binds), never the rest: the project
directory, home directories and the grader's hidden tests do not exist inside. The installs'
``site-packages``/``dist-packages`` directories are masked with empty directories, so sandboxed
code imports the standard library only, whatever it appends to ``sys.path``; packages are
importable only where the caller binds them (``Sandbox(python_path=[...])``, e.g.
``site_packages()`` for numpy). It has no network (own network namespace with only
``lo``), its own pid/ipc/uts namespaces, a private size-limited ``/tmp``, ``/dev`` and ``/proc``,
and runs with every capability dropped. ``/tmp`` and ``/dev/shm`` (for ``multiprocessing``) are
private size-limited tmpfs mounts. When the grader runs as root the command additionally
switches to a random unprivileged uid, so that ``RLIMIT_NPROC`` (which the kernel does not enforce
for root) stops fork bombs and root-only files stay unreadable.

Limits: wall-clock timeout (the whole process group and pid namespace are killed), CPU seconds,
address space, process count, file size, open files, the size of ``/tmp`` and the bytes of output
kept. ``unsafe_no_sandbox=True`` runs the same command with the rlimits only (no isolation) and must
be an explicit choice of the user (the CLI flag ``--unsafe-no-sandbox``).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence

from verigym.graders.code._audit import audit_argv
from verigym.graders.code._cgroup import Cgroup, create_cgroup
from verigym.graders.code._sandbox_io import (
    WORKDIR,
    Limits,
    SandboxResult,
    SandboxUnavailable,
    collect,
    kill_group,
    memfd,
    prlimit_argv,
    random_uid,
    stage_files,
    write_host_file,
)

__all__ = [
    "Limits",
    "Sandbox",
    "SandboxResult",
    "SandboxUnavailable",
    "kill_group",
    "python_executable",
    "random_uid",
    "run_sandboxed",
    "site_packages",
]

_SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")


def site_packages() -> str:
    """The grader environment's site-packages, for ``Sandbox(python_path=[site_packages()])``."""
    return sysconfig.get_paths()["purelib"]


def python_executable() -> str:
    """The real interpreter binary behind ``sys.executable`` (a venv's python is a symlink)."""
    return os.path.realpath(sys.executable)


@functools.cache
def _site_dirs() -> tuple[str, ...]:
    """Package directories of the host's Python installs that the sandbox binds (site-packages,
    dist-packages): masked with an empty tmpfs so candidates see the standard library only."""
    found: set[str] = set()
    roots = [*_python_prefixes(), "/usr", "/usr/local"]
    for root in roots:
        for lib in ("lib", "lib64", "local/lib"):
            base = os.path.join(root, lib)
            if not os.path.isdir(base):
                continue
            for entry in os.listdir(base):
                if not entry.startswith("python"):
                    continue
                for site in ("site-packages", "dist-packages"):
                    path = os.path.realpath(os.path.join(base, entry, site))
                    if os.path.isdir(path) and not os.path.islink(os.path.join(base, entry)):
                        found.add(path)
    bound = ("/usr/", *[p.rstrip("/") + "/" for p in _python_prefixes()])
    return tuple(sorted(p for p in found if p.startswith(bound)))


def _python_prefixes() -> list[str]:
    return sorted({os.path.realpath(sys.base_prefix), os.path.dirname(os.path.dirname(python_executable()))})


_probe_lock = threading.Lock()
_probe_result: dict[str, str | None] = {}


class Sandbox:
    """A reusable sandbox configuration.

    ``ro_binds``: extra host paths made visible read-only (a path, or ``(host, inside)``).
    ``writable_dirs``: host directories bound read-write (use sparingly: writes there are real).
    ``network``: keep the host network (off by default).
    ``python_path``: host directories of importable packages (e.g. ``site_packages()``) bound
    read-only and put on the code worker's ``sys.path`` (the worker runs ``python -S -I``: by
    default candidates import the standard library only).
    ``use_cgroup``: also cap the memory and process count of the whole sandbox with a cgroup when
    the host allows creating one (see ``_cgroup``); rlimits apply either way.
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
        python_path: Sequence[str] = (),
    ) -> None:
        self.unsafe = unsafe_no_sandbox
        self.use_cgroup = use_cgroup
        self.python_path = [os.path.realpath(p) for p in python_path]
        self.ro_binds = [(b, b) if isinstance(b, str) else b for b in ro_binds]
        self.ro_binds += [(p, f"/opt/verigym/path{i}") for i, p in enumerate(self.python_path)]
        self.writable_dirs = [(b, b) if isinstance(b, str) else b for b in writable_dirs]
        self.network = network
        self.bwrap = bwrap or shutil.which("bwrap")

    def python_path_inside(self) -> list[str]:
        """Where the ``python_path`` directories appear to sandboxed code (for ``sys.path``)."""
        if self.unsafe:
            return list(self.python_path)
        return [f"/opt/verigym/path{i}" for i in range(len(self.python_path))]

    # -- availability -------------------------------------------------------------------------
    def check(self) -> None:
        """Raise ``SandboxUnavailable`` unless bwrap can start a sandbox here (probed once)."""
        if self.unsafe:
            return
        if not self.bwrap:
            raise SandboxUnavailable(
                "bubblewrap (bwrap) is not installed and the code sandbox needs it: install it with "
                "`make setup` (as root or with passwordless sudo) or `sudo apt-get install bubblewrap` "
                "(`dnf install bubblewrap` on Fedora), or let graders run candidate code without "
                "isolation (--unsafe-no-sandbox where a command offers it)"
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
        for site in _site_dirs():  # the interpreter's own packages: hidden unless python_path binds them
            out.extend(["--perms", "0755", "--tmpfs", site])
        out += ["--dev", "/dev", "--proc", "/proc"]
        tmp = str(limits.tmp_mb * 1024 * 1024)
        out += ["--size", tmp, "--perms", "1777", "--tmpfs", "/tmp"]
        out += ["--size", tmp, "--perms", "1777", "--tmpfs", "/dev/shm"]  # multiprocessing's semaphores
        made.add("/tmp")
        fds = stage_files(out, files, made)
        out += ["--chdir", cwd]
        if drop_with == "setpriv":
            if root:
                uid = str(random_uid())
                out += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
            out += prlimit_argv(limits)
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
        audit: bool = True,
    ) -> SandboxResult:
        """Run ``cmd`` to completion (or timeout) and return what it did.

        ``audit``: when ``cmd`` is a Python invocation (``python [flags] -c/-m/script``), log its
        network, process and ctypes events (``SandboxResult.events``) through an audit hook."""
        limits = limits or Limits()
        files = files or {}
        events_r: int | None = None
        if audit:
            events_r, events_w = os.pipe()
            audited = audit_argv(cmd, events_w)
            if audited is None:
                os.close(events_r)
                os.close(events_w)
                events_r = None
            else:
                cmd = audited
        tmpdir: tempfile.TemporaryDirectory[str] | None = None
        if self.unsafe:
            tmpdir = tempfile.TemporaryDirectory(prefix="verigym-unsafe-")
            for rel, content in files.items():
                write_host_file(tmpdir.name, rel, content)
            argv, run_cwd = prlimit_argv(limits, fresh_uid=False) + list(cmd), tmpdir.name
            fds: list[int] = []
        else:
            self.check()
            argv, fds = self.argv(cmd, files=files, limits=limits, cwd=cwd)
            run_cwd = "/"
        stdin_fd = memfd(b"" if stdin is None else stdin.encode() if isinstance(stdin, str) else stdin)
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
                pass_fds=[*fds, events_w] if events_r is not None else fds,
                cwd=run_cwd,
                env={**base_env, **(env or {})},
                start_new_session=True,
            )
        except OSError as exc:
            if group is not None:
                group.remove()
            if events_r is not None:
                os.close(events_r)
            raise SandboxUnavailable(f"could not start the sandbox: {exc}") from exc
        finally:
            os.close(stdin_fd)
            for fd in fds:
                os.close(fd)
            if events_r is not None:
                os.close(events_w)
        try:
            result = collect(proc, limits, start, events_r)
        finally:
            kill_group(proc)
            if events_r is not None:
                os.close(events_r)
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
    audit: bool = True,
) -> SandboxResult:
    """Run ``cmd`` once in a fresh sandbox; ``files`` (relative paths) are placed in ``/tmp/work``.
    ``SandboxResult.events`` lists network/process events of Python commands (``audit``).

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
    return box.run(cmd, files=files, stdin=stdin, limits=limits, cwd=cwd, env=env, audit=audit)
