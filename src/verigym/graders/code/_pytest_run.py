"""The pytest runner used by SWE-style grading, run inside the sandbox.

It reads a one-time nonce from stdin (then points fd 0 at ``/dev/null`` so the code under test
cannot read it back), imports pytest from a read-only copy of the grader's site-packages before
the repository is on ``sys.path`` (so repository files cannot shadow it), records every test's
outcome through a plugin and a hook around each test call, and writes the report between nonce
markers on its own descriptor. Tests necessarily run in the same process as the code they test
(as with any pytest run): the nonce, kept in a closure, stops printed fake reports, not code that
hunts for it (see ``swe.framework_refs``).
"""

from __future__ import annotations

import importlib.util
import json
import secrets
from pathlib import Path
from typing import Any

__all__ = ["RUNNER", "SITE_INSIDE", "env", "new_nonce", "parse_report", "pytest_site_dir", "runner_source"]

SITE_INSIDE = "/opt/verigym/site"

RUNNER = r"""
import json, os, sys
def _verigym_run(site, args):
    nonce = sys.stdin.readline().strip()
    os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
    report_fd = os.dup(2)
    os.dup2(1, 2)
    events = []
    watch = ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto",
             "subprocess.Popen", "os.system")
    def audit(ev, a):
        if len(events) < 50 and ev.startswith(watch):
            events.append((ev + " " + " ".join(str(x)[:60] for x in a[1:3] if isinstance(x, (str, int, tuple))))[:160])
    sys.addaudithook(audit)
    def emit(kind, obj, _write=os.write, _dumps=json.dumps):
        _write(report_fd, ("\n" + nonce + kind + _dumps(obj) + nonce + "\n").encode())
    sys.path.insert(0, site)
    try:
        import pytest  # before the repository is on sys.path: its files cannot shadow pytest
    except BaseException as exc:
        emit("E", repr(exc))
        os._exit(3)
    sys.path.insert(0, os.getcwd())
    emit("B", {})
    results, collect, raised = {}, [], {}
    skips = (pytest.skip.Exception, pytest.xfail.Exception)
    class Recorder:
        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_call(self, item):
            outcome = yield
            exc = outcome.excinfo
            if exc is not None and not issubclass(exc[0], skips):
                raised[item.nodeid] = exc[0].__name__
        def pytest_runtest_logreport(self, report):
            n, prev = report.nodeid, results.get(report.nodeid)
            if report.failed:
                results[n] = "failed" if report.when == "call" else "error"
            elif report.skipped:
                if prev not in ("failed", "error"):
                    results[n] = "xfail" if hasattr(report, "wasxfail") else "skipped"
            elif report.when == "call" and prev is None:
                results[n] = "passed"
        def pytest_collectreport(self, report):
            if report.failed:
                collect.append(report.nodeid)
    code = pytest.main(args, plugins=[Recorder()])
    for n in raised:  # the test function raised, whatever the (patchable) report machinery says
        if results.get(n) == "passed":
            results[n] = "failed"
    emit("R", {"results": results, "collect_errors": collect, "exit": int(code), "events": events})
    os._exit(0)
_verigym_run(SITE, ARGS)
"""


def pytest_site_dir() -> str:
    """The site-packages directory holding the grader's pytest (bound read-only into the sandbox)."""
    spec = importlib.util.find_spec("pytest")
    if spec is None or spec.origin is None:
        raise RuntimeError("pytest is not installed in the grader's environment")
    return str(Path(spec.origin).resolve().parent.parent)


def new_nonce() -> str:
    return secrets.token_hex(16)


def parse_report(stderr: str, nonce: str) -> dict[str, Any]:
    """The runner's markers: ``{"boot": bool, "import_error": str|None, "report": dict|None}``."""
    out: dict[str, Any] = {"boot": False, "import_error": None, "report": None}
    pos = 0
    while True:
        start = stderr.find(nonce, pos)
        if start < 0:
            return out
        end = stderr.find(nonce, start + len(nonce) + 1)
        if end < 0:
            return out
        kind, body = stderr[start + len(nonce)], stderr[start + len(nonce) + 1 : end]
        pos = end + len(nonce)
        try:
            value = json.loads(body)
        except ValueError:
            continue
        if kind == "B":
            out["boot"] = True
        elif kind == "E":
            out["import_error"] = str(value)
        elif kind == "R" and isinstance(value, dict):
            out["report"] = value


def runner_source(args: list[str], site: str = SITE_INSIDE) -> str:
    return f"SITE = {site!r}\nARGS = {args!r}\n" + RUNNER


def env() -> dict[str, str]:
    return {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
