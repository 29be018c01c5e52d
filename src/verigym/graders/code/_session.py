"""One sandboxed worker process per candidate, driven over a frame protocol from the grader side.

The session starts ``bwrap ... python -S -I -c <worker>`` (or takes a ready one from the warm
pool), waits for the worker's *ready* frame (no ready frame = the sandbox itself failed =
infrastructure error), sends the candidate's code, then one frame per call (function problems;
"end" closes a case) or per io case. A worker that dies or stops answering (killed by the
candidate, a fork bomb, an rlimit) costs the case in flight a *fail* and is restarted for the next
case. Replies carry the call's sequence number; one that answers another call is a failure.

When the grader runs as root the worker is a zygote (see ``_worker``): at the end of a clean
session the grader sends "bye", expects "reset" once the zygote has killed the candidate's
processes and removed its files, then sends a fresh random token that only the zygote can read
(every process of the candidate's uid is dead by then) and hands the sandbox back to the pool only
when the token comes back. Anything else discards the sandbox. This hand-back runs on a background
thread once the verdict is known (``WarmPool.give_back``).
"""

from __future__ import annotations

import functools
import marshal
import os
import re
import secrets
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
        self.in_case = False
        self.loaded = False
        self.seq = self.case_seq = 0
        self.zygote = os.geteuid() == 0 and not sandbox.unsafe and warm

    def max_reply(self) -> int:
        """The largest reply accepted: results (function mode) or printed output (io mode)."""
        lim = self.limits
        return lim.max_result_bytes if self.mode == "function" else lim.max_output_bytes

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
        cfg = marshal.dumps({"rlimits": rlimits, "uid": uid, "path": path, "zygote": self.zygote}).hex()
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
            self.zygote,
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
        if spawned is None and self.zygote:
            spawned = POOL.spawn(self._spawn)
            POOL.register(key, spawned)
        elif spawned is None:
            spawned = self._spawn()
        if self.warm and self.zygote:  # a zygote comes back to the pool after the candidate
            POOL.ensure(key, self._spawn)
        elif self.warm:
            POOL.refill(key, self._spawn)
        self.proc, self.group = spawned.proc, spawned.group
        self.starts += 1
        job = {
            "op": "job",
            "uid": random_uid(),
            "mode": self.mode,
            "code": self.code,
            "entry": self.entry,
            "case_cpu": self.limits.cpu_limit(),
            "case_wall": self.limits.wall_limit(),
            "max_output": self.max_reply(),
        }
        self.in_case = False
        reply = self._exchange(job, self.limits.wall_limit() + _GRACE_S)
        self.loaded = reply.ok
        self.events += [str(e) for e in reply.data.get("events", [])][:50]
        if not reply.ok:
            self.load_error = f"the code failed to load: {reply.reason}"
            self.close(reuse=self.proc is not None)

    def close(self, reuse: bool = False) -> None:
        """Stop the worker; with ``reuse`` a zygote that ends the candidate cleanly (it killed
        the candidate's processes and removed its files, and answered a fresh token that only it
        can read) goes back to the warm pool for the next candidate."""
        live = self.proc is not None and self.proc.poll() is None
        if reuse and self.zygote and live:
            assert self.proc is not None
            proc, loaded = self.proc, self.loaded
            POOL.give_back(self._key(), Spawned(proc, self.group), lambda: _hand_back(proc, loaded))
            self.proc = self.group = None
            return
        if self.proc is not None:
            kill_group(self.proc)
            self.proc = None
        if self.group is not None:
            self.group.remove()
            self.group = None

    def __enter__(self) -> WorkerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(reuse=True)

    # -- cases ----------------------------------------------------------------------------------
    def end_case(self) -> None:
        """End the current case: the worker kills the process that served its calls, so the
        next case starts from the freshly loaded module (no reply is awaited)."""
        if not self.in_case or self.proc is None or self.proc.stdin is None:
            return
        self.in_case = False
        try:
            write_frame(self.proc.stdin.fileno(), {"op": "end"}, fmt="marshal", deadline=time.monotonic() + 5)
        except (TimeoutError, OSError):
            self.close()

    def run_case(self, payload: dict[str, Any], timeout_s: float | None = None) -> CaseReply:
        """Send one call (function mode: part of the current case) or one io case. A dead worker is
        restarted first; a load failure fails every case. ``timeout_s`` is the io wall limit."""
        if self.load_error is not None:
            return CaseReply(ok=False, reason=self.load_error)
        if self.proc is None or self.proc.poll() is not None:
            self.start()
            if self.load_error is not None:
                return CaseReply(ok=False, reason=self.load_error)
        wall = self.limits.wall_limit()
        self.seq += 1
        if not self.in_case:
            self.case_seq = self.seq  # the first call of a case: its child is forked for it
        self.in_case = payload.get("op") == "call"
        reply = self._exchange({**payload, "timeout": wall, "seq": self.seq}, wall + _GRACE_S)
        if reply.data.get("seq", self.seq) != self.seq:
            self.close()
            return CaseReply(ok=False, reason="malformed reply (not the answer to this call)")
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
        deadline = time.monotonic() + wait_s
        try:
            frame = read_frame(
                self.proc.stdout.fileno(), deadline=deadline, max_bytes=self.max_reply() + 65536
            )
            while (
                isinstance(frame, dict)
                and isinstance(frame.get("case"), int)
                and frame["case"] < self.case_seq
            ):
                # the worker's verdict on an earlier case that ended (e.g. its wall clock ran out
                # while the tests ran between calls) after the grader had moved on: not this call's
                frame = read_frame(
                    self.proc.stdout.fileno(), deadline=deadline, max_bytes=self.max_reply() + 65536
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
        return CaseReply(ok=bool(frame.get("ok")), data=frame, reason=str(frame.get("error", ""))[:2000])


def _hand_back(proc: subprocess.Popen[bytes], loaded: bool) -> bool:
    """End the candidate in a zygote and check that the zygote itself answers (see the module
    docstring); True when it can serve the next candidate."""
    assert proc.stdin is not None and proc.stdout is not None
    wfd, rfd = proc.stdin.fileno(), proc.stdout.fileno()
    try:
        if loaded:
            write_frame(wfd, {"op": "bye"}, fmt="marshal", deadline=time.monotonic() + 2)
        reset = read_frame(rfd, deadline=time.monotonic() + 5, max_bytes=4096)
        if reset != {"reset": True}:
            return False
        token = secrets.token_hex(16)
        write_frame(wfd, {"op": "verify", "token": token}, fmt="marshal", deadline=time.monotonic() + 2)
        return bool(read_frame(rfd, deadline=time.monotonic() + 5, max_bytes=4096) == {"verified": token})
    except (TimeoutError, OSError, CodecError, ValueError):
        return False


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
