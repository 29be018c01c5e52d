"""One sandboxed worker process per candidate, driven over a frame protocol from the grader side.

The session starts ``bwrap ... python -S -I -c <worker>``, waits for the worker's *ready* frame
(no ready frame = the sandbox itself failed = infrastructure error), sends the candidate's code,
then one frame per case. A worker that dies or stops answering (killed by the candidate, a fork
bomb, an rlimit) costs the case in flight a *fail* and is restarted for the next case.
"""

from __future__ import annotations

import functools
import marshal
import os
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verigym.graders.code._cgroup import Cgroup
from verigym.graders.code._codec import CodecError, read_frame, write_frame
from verigym.graders.code._pool import POOL, Spawned
from verigym.graders.code._sandbox_io import nproc_limit
from verigym.graders.code.sandbox import (
    Limits,
    Sandbox,
    SandboxUnavailable,
    kill_group,
    python_executable,
    random_uid,
)

__all__ = ["CaseReply", "WorkerSession", "worker_source"]

_GRACE_S = 2.0


@functools.cache
def worker_source() -> str:
    """The stdlib-only worker program: the codec followed by the worker, as one script."""
    here = Path(__file__).parent
    parts = []
    for name in ("_codec.py", "_worker.py"):
        text = (here / name).read_text()
        text = re.sub(r"^from __future__ import annotations\n", "", text, flags=re.M)
        text = re.sub(r"^from verigym\.graders\.code\._codec import (\([^)]*\)|.*)\n", "", text, flags=re.M)
        text = re.sub(
            r"^TYPE_CHECKING = False\nif TYPE_CHECKING:.*\n    from typing import Any\n", "", text, flags=re.M
        )
        parts.append(text)
    return "from __future__ import annotations\n" + "\n".join(parts) + "\nmain()\n"


# Compiling the worker's source costs more than starting the interpreter: ship its code object.
_BOOT = "import marshal,sys;exec(marshal.loads(bytes.fromhex(sys.argv.pop(1))))"


@functools.cache
def worker_code(python: str) -> str:
    """The worker compiled by ``python`` (same interpreter, so the same marshal/bytecode format), in hex."""
    if os.path.realpath(python) == python_executable():
        return marshal.dumps(compile(worker_source(), "<verigym-worker>", "exec")).hex()
    boot = (
        "import marshal,sys;print(marshal.dumps(compile(sys.stdin.read(),'<verigym-worker>','exec')).hex())"
    )
    out = subprocess.run(
        [python, "-S", "-I", "-c", boot], input=worker_source(), capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SandboxUnavailable(f"{python} cannot compile the worker: {out.stderr.strip()[-300:]}")
    return out.stdout.strip()


@dataclass
class CaseReply:
    """What the worker said about one case: ``ok`` False means the candidate failed it (``reason``)."""

    ok: bool
    data: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


class WorkerSession:
    """A candidate loaded in a sandboxed worker. ``mode`` is ``function`` or ``io``.

    Raises ``SandboxUnavailable`` only when a fresh sandbox cannot be started (infrastructure).
    """

    def __init__(
        self,
        code: str,
        *,
        mode: str,
        entry_point: Sequence[str] = (),
        limits: Limits,
        sandbox: Sandbox,
        python: str | None = None,
        warm: bool = True,
    ) -> None:
        self.code, self.mode, self.entry = code, mode, list(entry_point)
        self.warm = warm
        self.limits, self.sandbox = limits, sandbox
        self.python = python or python_executable()
        self.proc: subprocess.Popen[bytes] | None = None
        self.group: Cgroup | None = None
        self.load_error: str | None = None
        self.events: list[str] = []
        self.starts = 0

    # -- lifecycle ------------------------------------------------------------------------------
    def _argv(self) -> tuple[list[str], list[int]]:
        lim = self.limits
        total_cpu = max(lim.cpu_limit() * 4, 30)
        rlimits = {
            "RLIMIT_AS": lim.memory_mb * 1024 * 1024,
            "RLIMIT_NPROC": nproc_limit(
                lim.max_procs, fresh_uid=os.geteuid() == 0 and not self.sandbox.unsafe
            ),
            "RLIMIT_FSIZE": lim.max_file_mb * 1024 * 1024,
            "RLIMIT_NOFILE": lim.max_open_files,
            "RLIMIT_CPU": total_cpu,
        }
        uid = None if self.sandbox.unsafe else random_uid()
        path = self.sandbox.python_path_inside()
        cfg = marshal.dumps({"rlimits": rlimits, "uid": uid, "path": path}).hex()
        cmd = [self.python, "-S", "-I", "-B", "-c", _BOOT, worker_code(self.python), cfg]
        if self.sandbox.unsafe:
            return cmd, []
        return self.sandbox.argv(cmd, files={}, limits=lim, cwd="/tmp", drop_with="inprocess")

    def _key(self) -> tuple[object, ...]:
        box = self.sandbox
        return (
            self.python,
            self.limits,
            box.unsafe,
            box.network,
            box.bwrap,
            box.use_cgroup,
            tuple(box.ro_binds),
            tuple(box.writable_dirs),
        )

    def _spawn(self) -> Spawned:
        """Start a worker and wait for its ready frame (no ready frame: the sandbox is unusable)."""
        argv, fds = self._argv()
        group = self.sandbox.cgroup(self.limits)
        if group is not None:
            argv = group.wrap(argv)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=fds,
                cwd="/tmp" if self.sandbox.unsafe else "/",
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"},
                start_new_session=True,
            )
        except OSError as exc:
            if group is not None:
                group.remove()
            raise SandboxUnavailable(f"could not start the sandbox: {exc}") from exc
        finally:
            for fd in fds:
                os.close(fd)
        spawned = Spawned(proc, group)
        assert proc.stdout is not None
        try:
            ready = read_frame(proc.stdout.fileno(), deadline=time.monotonic() + 20, max_bytes=4096)
        except (TimeoutError, CodecError):
            ready = None
        if not isinstance(ready, dict) or not ready.get("ready"):
            err = _stderr(proc)
            spawned.discard()
            raise SandboxUnavailable(f"the sandbox did not start: {err or 'no ready signal from the worker'}")
        return spawned

    def start(self) -> None:
        """Start a fresh worker (or take a warm one) and load the code; sets ``load_error`` when
        the candidate's code fails to load."""
        self.close()
        self.sandbox.check()
        key = self._key()
        spawned = POOL.take(key) if self.warm else None
        if spawned is None:
            spawned = self._spawn()
        if self.warm:
            POOL.refill(key, self._spawn)
        self.proc, self.group = spawned.proc, spawned.group
        self.starts += 1
        job = {
            "mode": self.mode,
            "code": self.code,
            "entry": self.entry,
            "case_cpu": self.limits.cpu_limit(),
            "max_output": self.limits.max_output_bytes,
        }
        reply = self._exchange(job, self.limits.timeout_s + _GRACE_S)
        if not reply.ok:
            self.load_error = f"the code failed to load: {reply.reason}"
            self.close()
        self.events += [str(e) for e in reply.data.get("events", [])][:50]

    def close(self) -> None:
        if self.proc is not None:
            kill_group(self.proc)
            self.proc = None
        if self.group is not None:
            self.group.remove()
            self.group = None

    def __enter__(self) -> WorkerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- cases ----------------------------------------------------------------------------------
    def run_case(self, payload: dict[str, Any], timeout_s: float) -> CaseReply:
        """Send one case. A dead worker is restarted first; a load failure fails every case."""
        if self.load_error is not None:
            return CaseReply(ok=False, reason=self.load_error)
        if self.proc is None or self.proc.poll() is not None:
            self.start()
            if self.load_error is not None:
                return CaseReply(ok=False, reason=self.load_error)
        reply = self._exchange({**payload, "timeout": timeout_s}, timeout_s + _GRACE_S)
        self.events += [str(e) for e in reply.data.get("events", [])][: max(0, 50 - len(self.events))]
        return reply

    def _exchange(self, msg: dict[str, Any], wait_s: float) -> CaseReply:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        try:
            fd = self.proc.stdin.fileno()
            os.set_blocking(fd, False)
            write_frame(fd, msg, fmt="marshal", deadline=time.monotonic() + wait_s)
        except TimeoutError:
            self.close()
            return CaseReply(ok=False, reason=f"timeout: the runner took no input for {wait_s:g}s")
        except OSError:
            self.close()
            return CaseReply(ok=False, reason="the candidate's process died before the case started")
        try:
            frame = read_frame(
                self.proc.stdout.fileno(),
                deadline=time.monotonic() + wait_s,
                max_bytes=self.limits.max_output_bytes + 65536,
            )
        except TimeoutError:
            self.close()
            return CaseReply(ok=False, reason=f"timeout: no answer within {wait_s:g}s")
        except CodecError as exc:
            self.close()
            return CaseReply(ok=False, reason=str(exc))
        if frame is None:
            self.close()
            return CaseReply(ok=False, reason="the candidate killed or broke its own runner")
        if not isinstance(frame, dict):
            return CaseReply(ok=False, reason="malformed reply")
        return CaseReply(ok=bool(frame.get("ok")), data=frame, reason=str(frame.get("error", ""))[:500])


def _stderr(proc: subprocess.Popen[bytes]) -> str:
    if proc.stderr is None:
        return ""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        fd = proc.stderr.fileno()
        os.set_blocking(fd, False)  # a leftover process may hold the pipe open
        return os.read(fd, 4000).decode(errors="replace").strip()
    except (OSError, ValueError):
        return ""
