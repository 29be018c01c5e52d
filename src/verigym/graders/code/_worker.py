"""The worker that runs inside the sandbox: loads the candidate's code and runs it case by case.

Stdlib only; its source (after ``_codec``'s) is passed to ``python -S -I -c`` inside bwrap.
The worker knows nothing of the tests: it receives arguments (or stdin) and sends back what the
candidate returned (or printed), as plain data. Verdicts are computed by the grader outside the
sandbox, so anything the candidate does to its process (patching it, writing fake frames,
killing it) can only change the data it claims, never the comparison.

**Cases.** Each case runs in a child forked from the loaded candidate, in its own process group
with a CPU-time limit (``RLIMIT_CPU``) and a wall-clock limit that the worker enforces (so a
spinning or sleeping case is killed without losing the warm sandbox; the grader's own deadline
is a backstop). For function problems the
child answers every call of its case itself on the protocol descriptors (module state persists
between the calls of one case, as in plain Python, and is fresh for the next case) and exits on
"end"; when it dies instead, the worker reports why. The candidate's module is registered as
``__candidate__`` so that ``pickle``/``multiprocessing`` find its functions.

**Zygote.** When the grader runs as root, the worker stays a zygote that never runs candidate
code: each candidate runs in a fork under its own fresh uid; afterwards the zygote, as that uid,
kills every process it left, removes its files in ``/tmp`` and ``/dev/shm`` and its SysV IPC
objects (``ipcrm --all``), then proves it is
itself by echoing a token only it can read (``_session``), and serves the next candidate.

Protocol: length-prefixed frames on the fds that were stdin/stdout of the sandbox (fds 0/1/2 of
the candidate point at ``/dev/null``): marshal from the grader (trusted), JSON back (parsed by the
grader as untrusted data). Only C modules are imported at startup: start-up time is throughput.
"""

from __future__ import annotations

import builtins
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
_MUTABLE = (list, dict, set, bytearray)
EVENTS: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if len(EVENTS) < 50 and event.startswith(_WATCH):
        shown = [a if isinstance(a, str | int | float | tuple) else type(a).__name__ for a in args[:3]]
        try:
            EVENTS.append(f"{event}{tuple(shown)!r}"[:200])
        except Exception:
            EVENTS.append(event)


def _describe(exc: BaseException) -> dict[str, str]:
    """The exception as text plus its nearest built-in class (what ``except`` in a test would see)."""
    name = type(exc).__name__
    try:
        text = str(exc)[:2000]
    except BaseException:
        text = "<unprintable>"
    base = "Exception"
    for cls in type(exc).__mro__:
        if getattr(builtins, cls.__name__, None) is cls:
            base = cls.__name__
            break
    return {"error": f"{name}: {text}" if text else name, "exc": base, "msg": text}


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == 24:
            return "timeout: went over its CPU time limit (SIGXCPU)"
        return f"was killed by signal {_SIGNALS.get(sig, sig)}"
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
    # SIGXCPU at the soft limit names the cause; a candidate that ignores it is SIGKILLed a second later
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if fsize is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    EVENTS.clear()


def _args(msg: dict[str, Any]) -> tuple[Any, Any]:
    if "blob" in msg:
        args, kwargs = marshal.loads(msg["blob"])
        return args, kwargs
    got = decode(msg["tokens"])
    return got[0], got[1]


def _one_call(fns: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any]:
    args, kwargs = _args(msg)
    mutable = {str(i): a for i, a in enumerate(args) if isinstance(a, _MUTABLE)}
    mutable.update({k: a for k, a in kwargs.items() if isinstance(a, _MUTABLE)})
    before = _args(msg) if mutable else None
    try:
        value = fns[msg["name"]](*args, **kwargs)
    except BaseException as exc:
        return {"ok": False, **_describe(exc)}
    reply: dict[str, Any] = {"ok": True, "value": encode(value)}
    if before is not None:  # in-place changes to arguments, for tests that check them
        old = {str(i): a for i, a in enumerate(before[0])}
        old.update(before[1])
        changed = {}
        for key, arg in mutable.items():
            try:
                same = type(arg) is type(old[key]) and bool(arg == old[key])
            except BaseException:
                same = False
            if not same:
                changed[key] = encode(arg)
        if changed:
            reply["changed"] = changed
    return reply


_BYE = 3  # exit status of a case child that read "bye": the session ends too


def _serve_case(fns: dict[str, Any], first: bytes, proto: tuple[int, int]) -> None:
    """The case child: answer calls on the protocol descriptors until "end" (exit 0) or "bye"."""
    raw: bytes | None = first
    while raw is not None:
        msg = marshal.loads(raw)
        if not isinstance(msg, dict) or msg.get("op") != "call":
            os._exit(_BYE if isinstance(msg, dict) and msg.get("op") == "bye" else 0)
        try:
            reply = _one_call(fns, msg)
        except CodecError as exc:
            reply = {"ok": False, "error": f"unsupported result: {exc}"}
        except BaseException as exc:
            reply = {"ok": False, "error": f"unsupported result: {_describe(exc)['error']}"}
        reply["events"] = list(EVENTS)
        reply["seq"] = msg.get("seq")
        try:
            body = dumps(reply)
        except BaseException as exc:
            why = f"unsupported result: {_describe(exc)['error']}"
            body = dumps({"ok": False, "error": why, "seq": msg.get("seq")})
        write_raw(proto[1], body)
        raw = read_raw(proto[0])


def _case(fns: dict[str, Any], first: bytes, cpu: int, wall: float, proto: tuple[int, int]) -> bool:
    """Run one case in a forked child that reads and answers its calls itself, and wait for it up
    to ``wall`` seconds (then it is killed: the zygote survives a spinning case). False when the
    child read "bye" (the session is over). A failure frame names the seq of the case's first call,
    so the grader can drop one that arrives after it ended the case."""
    pid = os.fork()
    if pid == 0:
        try:
            _child_limits(cpu)
            _serve_case(fns, first, proto)
        finally:
            os._exit(0)
    timed_out = wall > 0 and _timed_out(pid, wall)
    status = _reap(pid) if timed_out else _wait(pid)
    try:  # noqa: SIM105 (what the case left in its process group, e.g. a Pool's workers)
        os.kill(-pid, 9)
    except OSError:
        pass
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == _BYE:
        return False
    if timed_out or not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        why = f"timeout: went over its wall-clock limit of {wall:g}s" if timed_out else _status(status)
        msg = marshal.loads(first)
        write_frame(proto[1], {"ok": False, "error": f"no result: the call {why}", "case": msg.get("seq")})
    return True


def _wait(pid: int) -> int:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


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


def _load(job: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    code = compile(job["code"], "<candidate>", "exec", dont_inherit=True, optimize=0)
    fns: dict[str, Any] = {}
    if job["mode"] == "function":
        module = type(sys)("__candidate__")
        module.__dict__["__builtins__"] = __builtins__
        sys.modules["__candidate__"] = module  # pickle (multiprocessing) finds functions by module
        exec(code, module.__dict__)
        fns = {name: module.__dict__.get(name) for name in job["entry"]}
        for name, fn in fns.items():
            if not callable(fn):
                raise NameError(f"the code does not define a function named {name!r}")
    return code, fns


def _drop(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _wipe(top: str, uid: int) -> None:
    """Remove everything ``uid`` owns under ``top`` (iteratively: no recursion on deep trees)."""
    stack, dirs = [top], []
    while stack:
        d = stack.pop()
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            path = f"{d}/{name}"
            try:
                st = os.lstat(path)
            except OSError:
                continue
            is_dir = st.st_mode & 0o170000 == 0o040000
            mine = st.st_uid == uid
            if is_dir:
                if mine:
                    try:  # noqa: SIM105
                        os.chmod(path, 0o700)
                    except OSError:
                        pass
                    dirs.append(path)
                stack.append(path)
            elif mine:
                try:  # noqa: SIM105
                    os.unlink(path)
                except OSError:
                    pass
    for d in reversed(dirs):
        try:  # noqa: SIM105
            os.rmdir(d)
        except OSError:
            pass


def _any_ipc() -> bool:
    """Whether any SysV IPC object exists in the sandbox's own IPC namespace (True when it cannot
    be read): most candidates make none, and starting ``ipcrm`` costs more than the rest of the
    clean-up."""
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}", "rb") as fh:
                if len(fh.read(65536).strip().splitlines()) > 1:  # a header line, then one per object
                    return True
        except OSError:
            return True
    return False


def _clean(uid: int) -> None:
    """After a candidate: as its uid, kill every process it left and remove its files."""
    pid = os.fork()
    if pid == 0:
        try:
            _drop(uid)
            for _ in range(3):
                try:
                    os.kill(-1, 9)  # every process this uid may signal, in this pid namespace
                except OSError:
                    break
            for top in ("/tmp", "/dev/shm"):
                _wipe(top, uid)
            if _any_ipc() and os.path.exists("/usr/bin/ipcrm"):  # its SysV shm, semaphores, queues
                os.execv("/usr/bin/ipcrm", ["ipcrm", "--all"])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _session(proto: tuple[int, int], job: dict[str, Any]) -> None:
    """Load one candidate and serve its cases until the grader says ``bye`` or closes."""
    cpu, wall, limit = int(job["case_cpu"]), float(job.get("case_wall") or 0), int(job["max_output"])
    sys.addaudithook(_audit)
    try:
        code, fns = _load(job)
        load: dict[str, Any] = {"ok": True}
    except BaseException as exc:
        load = {"ok": False, **_describe(exc)}
    load["events"] = list(EVENTS)
    write_frame(proto[1], load)
    if not load["ok"]:
        return
    n = 0
    while True:
        raw = read_raw(proto[0])
        if raw is None:
            return
        msg = marshal.loads(raw)
        if not isinstance(msg, dict) or msg.get("op") == "bye":
            return
        n += 1
        if msg["op"] == "call":
            if not _case(fns, raw, cpu, wall, proto):
                return
        elif msg["op"] == "io":
            write_frame(proto[1], _run_io(code, msg, cpu, limit, proto, n))


def main() -> None:
    cfg = marshal.loads(bytes.fromhex(sys.argv[1]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for name, value in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    zygote = bool(cfg.get("zygote")) and os.getuid() == 0
    if os.getuid() == 0 and cfg.get("uid") and not zygote:
        _drop(int(cfg["uid"]))
    sys.path[:0] = list(cfg.get("path", []))
    proto = (os.dup(0), os.dup(1))
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    write_frame(proto[1], {"ready": True, "uid": os.getuid(), "zygote": zygote})
    while True:
        job = read_frame(proto[0], fmt="marshal")
        if not isinstance(job, dict) or (zygote and job.get("op") != "job"):
            return
        if not zygote:
            _session(proto, job)
            return
        # zygote: each candidate runs in a fork under its own fresh uid; this process never runs
        # candidate code, and after each one kills what it left and removes its files
        uid = int(job["uid"])
        pid = os.fork()
        if pid == 0:
            try:
                _drop(uid)
                _session(proto, job)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        _clean(uid)
        write_frame(proto[1], {"reset": True})
        check = read_frame(proto[0], fmt="marshal")
        if not isinstance(check, dict) or check.get("op") != "verify":
            return
        write_frame(proto[1], {"verified": check.get("token")})
