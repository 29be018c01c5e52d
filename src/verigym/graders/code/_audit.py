"""Event log for sandboxed Python commands: a PEP 578 audit hook reporting on a pipe.

``audit_argv`` rewrites ``python [flags] (-c CODE | -m MODULE | SCRIPT) [args]`` into the same
run preceded by a tiny bootstrap that installs an audit hook; the hook writes one line per
network, process or ctypes event to a descriptor the grader reads. It is a log, not a guard:
the network namespace is what blocks traffic, and code that wants to hide can close the pipe.
Commands that are not recognisable Python invocations run unchanged (no events).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["audit_argv", "parse_events"]

WATCH = (
    "socket.connect",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.sendto",
    "socket.bind",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.kill",
    "ctypes.dlopen",
)

BOOT = f"""
import os as _vg_os, sys as _vg_sys
def _vg_hook(ev, args, _w=_vg_os.write, _fd=int(_vg_sys.argv[1]), _watch={WATCH!r}):
    if ev.startswith(_watch):
        try:
            shown = " ".join(str(a)[:80] for a in args[:3] if isinstance(a, (str, int, tuple)))
            _w(_fd, (ev + " " + shown).replace("\\n", " ")[:200].encode() + b"\\n")
        except Exception:
            pass
_vg_sys.addaudithook(_vg_hook)
_vg_mode, _vg_target, _vg_rest = _vg_sys.argv[2], _vg_sys.argv[3], _vg_sys.argv[4:]
del _vg_hook
if _vg_mode == "-c":
    _vg_sys.argv = ["-c", *_vg_rest]
    _vg_code = compile(_vg_target, "<string>", "exec")
    del _vg_mode, _vg_target, _vg_rest, _vg_os, _vg_sys
    exec(_vg_code)
else:
    import runpy as _vg_runpy
    _vg_sys.argv = [_vg_target, *_vg_rest]
    if _vg_mode == "-m":
        _vg_runpy.run_module(_vg_target, run_name="__main__", alter_sys=True)
    else:
        if not (_vg_sys.flags.isolated or getattr(_vg_sys.flags, "safe_path", False)):
            _vg_sys.path[0] = _vg_os.path.dirname(_vg_os.path.abspath(_vg_target))
        _vg_runpy.run_path(_vg_target, run_name="__main__")
"""

_ARG_FLAGS = {"-X", "-W", "--check-hash-based-pycs"}


def audit_argv(cmd: Sequence[str], fd: int) -> list[str] | None:
    """``cmd`` with the audit bootstrap, or None when it is not a plain Python invocation."""
    if not cmd or not os.path.basename(cmd[0]).startswith("python"):
        return None
    flags: list[str] = []
    i = 1
    while i < len(cmd):
        arg = cmd[i]
        if arg in ("-c", "-m"):
            if i + 1 >= len(cmd):
                return None
            return [cmd[0], *flags, "-c", BOOT, str(fd), arg, cmd[i + 1], *cmd[i + 2 :]]
        if arg == "-" or arg == "--":
            return None
        if not arg.startswith("-"):
            return [cmd[0], *flags, "-c", BOOT, str(fd), "file", arg, *cmd[i + 1 :]]
        if not arg.startswith("--") and any(c in arg[1:] for c in "cm"):
            return None  # combined flags ending in -c/-m: leave alone
        flags.append(arg)
        if arg in _ARG_FLAGS:
            if i + 1 >= len(cmd):
                return None
            flags.append(cmd[i + 1])
            i += 1
        i += 1
    return None


def parse_events(raw: bytes, limit: int = 100) -> list[str]:
    """The logged lines (at most ``limit``)."""
    return [ln for ln in raw.decode(errors="replace").splitlines() if ln.strip()][:limit]
