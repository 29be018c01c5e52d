"""The worker that runs inside the sandbox: loads the candidate's code and runs it case by case.

Stdlib only; its source (after ``_codec``'s) is passed to ``python -S -I -c`` inside bwrap.
The worker knows nothing of the tests: it receives arguments (or stdin) and sends back what the
candidate returned (or printed), as plain data. Verdicts are computed by the grader outside the
sandbox, so anything the candidate does to this process (patching it, writing fake frames,
killing it) can only change the data it claims, never the comparison.

Each case runs in a forked child with its own process group, CPU limit and wall timeout; the
child is killed with its group afterwards. Protocol: length-prefixed frames on the fds that were
stdin/stdout of the sandbox (fds 0/1/2 of the candidate point at ``/dev/null``): marshal from the
grader (trusted), JSON back (parsed by the grader as untrusted data). The worker imports only C
modules at startup (no ``json``/``re``/``typing``): its start-up time is grading throughput.
"""

from __future__ import annotations

import marshal
import os
import resource
import select
import sys
import time

from verigym.graders.code._codec import (
    CodecError,
    decode,
    dumps,
    encode,
    read_frame,
    read_raw,
    write_frame,
    write_raw,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main"]

_SIGNALS = {
    6: "SIGABRT",
    7: "SIGBUS",
    9: "SIGKILL",
    11: "SIGSEGV",
    15: "SIGTERM",
    24: "SIGXCPU",
    25: "SIGXFSZ",
}
_WATCH = (
    "socket.",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.kill",
    "os.killpg",
    "ctypes.dlopen",
    "shutil.rmtree",
)
EVENTS: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if len(EVENTS) < 50 and event.startswith(_WATCH):
        shown = [a if isinstance(a, str | int | float | tuple) else type(a).__name__ for a in args[:3]]
        try:
            EVENTS.append(f"{event}{tuple(shown)!r}"[:200])
        except Exception:
            EVENTS.append(event)


def _describe(exc: BaseException) -> str:
    name = type(exc).__name__
    try:
        text = str(exc)[:300]
    except BaseException:
        text = "<unprintable>"
    return f"{name}: {text}" if text else name


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"killed by signal {_SIGNALS.get(sig, sig)}"
    return f"exited with code {os.WEXITSTATUS(status)}"


def _reap(pid: int) -> int:
    for target in (-pid, pid):
        try:  # noqa: SIM105 (contextlib costs start-up time in the sandbox)
            os.kill(target, 9)
        except OSError:
            pass
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


def _timed_out(pid: int, timeout: float) -> bool:
    """Wait for ``pid`` to exit (without reaping it); True when ``timeout`` passed first."""
    try:
        fd = os.pidfd_open(pid)  # Linux >= 5.3
    except (AttributeError, OSError):
        fd = -1
    if fd >= 0:
        try:
            return not select.select([fd], [], [], timeout)[0]
        finally:
            os.close(fd)
    deadline, delay = time.monotonic() + timeout, 0.0005
    while time.monotonic() < deadline:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    return True


def _child_limits(cpu: int, fsize: int | None = None) -> None:
    os.setpgid(0, 0)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    if fsize is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    EVENTS.clear()


def _call(fn: Any, msg: dict[str, Any], cpu: int, limit: int, proto: tuple[int, int]) -> bytes:
    """Run one call in a forked child; returns the JSON body to relay (the child's, unparsed)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            for fd in proto:
                os.close(fd)
            _child_limits(cpu)
            args, kwargs = decode(msg["args"]), decode(msg["kwargs"])
            try:
                reply: dict[str, Any] = {"ok": True, "value": encode(fn(*args, **kwargs))}
                if any(isinstance(a, list | dict | set) for a in args):
                    try:  # noqa: SIM105 (in-place changes to arguments, for tests that check them)
                        reply["args_after"] = encode(args)
                    except (CodecError, RecursionError):
                        pass
            except CodecError as exc:
                reply = {"ok": False, "error": f"unsupported result: {exc}"}
            except BaseException as exc:
                reply = {"ok": False, "error": _describe(exc)}
            reply["events"] = list(EVENTS)
            try:
                write_frame(w, reply)
            except (ValueError, TypeError, RecursionError) as exc:
                write_frame(w, {"ok": False, "error": f"unsupported result: {_describe(exc)}"})
        finally:
            os._exit(0)
    os.close(w)
    try:
        body = read_raw(r, deadline=time.monotonic() + msg["timeout"], max_bytes=limit)
        if body is None:
            body = dumps({"ok": False, "error": f"no result: the call {_status(_reap(pid))}"})
    except TimeoutError:
        body = dumps({"ok": False, "error": f"timeout after {msg['timeout']:g}s"})
    except CodecError as exc:
        body = dumps({"ok": False, "error": str(exc)})
    finally:
        os.close(r)
        _reap(pid)
    return body


def _run_io(
    code: Any, msg: dict[str, Any], cpu: int, limit: int, proto: tuple[int, int], n: int
) -> dict[str, Any]:
    paths = [f"/tmp/.vg{n}_{s}" for s in ("in", "out", "err")]
    with open(paths[0], "wb") as fh:
        fh.write(msg["stdin"].encode())
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            for fd in proto:
                os.close(fd)
            _child_limits(cpu, limit + 1)
            fds = [
                os.open(paths[0], os.O_RDONLY),
                os.open(paths[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
                os.open(paths[2], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600),
            ]
            for i, fd in enumerate(fds):
                os.dup2(fd, i)
            sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            try:
                exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
                status = 0
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                import traceback

                traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status & 0xFF)
    timed_out = _timed_out(pid, msg["timeout"])
    status = _reap(pid)
    out, err = b"", b""
    try:
        with open(paths[1], "rb") as fh:
            out = fh.read(limit + 1)
        with open(paths[2], "rb") as fh:
            err = fh.read(4000)
    except OSError:
        pass
    for p in paths:
        try:  # noqa: SIM105
            os.unlink(p)
        except OSError:
            pass
    reply: dict[str, Any] = {"ok": True, "stdout": out[:limit].decode(errors="replace")}
    reply["stderr"] = err.decode(errors="replace")[-2000:]
    reply["truncated"] = len(out) > limit
    reply["timeout"] = timed_out
    reply["exit"] = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    reply["status"] = _status(status)
    return reply


def main() -> None:
    cfg = marshal.loads(bytes.fromhex(sys.argv[1]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for name, value in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    if os.getuid() == 0 and cfg.get("uid"):
        uid = int(cfg["uid"])
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    sys.path[:0] = list(cfg.get("path", []))
    proto = (os.dup(0), os.dup(1))
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    write_frame(proto[1], {"ready": True, "uid": os.getuid()})
    job = read_frame(proto[0], fmt="marshal")
    if not isinstance(job, dict):
        return
    cpu, limit = int(job["case_cpu"]), int(job["max_output"])
    sys.addaudithook(_audit)
    try:
        code = compile(job["code"], "<candidate>", "exec", dont_inherit=True, optimize=0)
        fns: dict[str, Any] = {}
        if job["mode"] == "function":
            ns: dict[str, Any] = {"__name__": "__candidate__", "__builtins__": __builtins__}
            exec(code, ns)
            fns = {name: ns.get(name) for name in job["entry"]}
            for name, fn in fns.items():
                if not callable(fn):
                    raise NameError(f"the code does not define a function named {name!r}")
        load: dict[str, Any] = {"ok": True}
    except BaseException as exc:
        load = {"ok": False, "error": _describe(exc)}
    load["events"] = list(EVENTS)
    write_frame(proto[1], load)
    if not load["ok"]:
        return
    n = 0
    while True:
        msg = read_frame(proto[0], fmt="marshal")
        if not isinstance(msg, dict):
            return
        n += 1
        if job["mode"] == "function":
            write_raw(proto[1], _call(fns[msg["name"]], msg, cpu, limit, proto))
        else:
            write_frame(proto[1], _run_io(code, msg, cpu, limit, proto, n))
