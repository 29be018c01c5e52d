"""The pytest runner used by SWE-style grading, run inside the sandbox.

It reads a one-time nonce from stdin (then points fd 0 at ``/dev/null`` so the code under test
cannot read it back), imports pytest from a read-only copy of the grader's site-packages, records
every test's outcome through a plugin, and writes the report between nonce markers on its own
descriptor. Tests necessarily run in the same process as the code they test (as with any pytest
run); the nonce only stops the candidate from printing a fake report.
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
NONCE = sys.stdin.readline().strip()
null = os.open("/dev/null", os.O_RDONLY)
os.dup2(null, 0)
REPORT = os.dup(2)
os.dup2(1, 2)
sys.path[:0] = [os.getcwd(), SITE]
EVENTS = []
WATCH = ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto", "subprocess.Popen", "os.system")
def _audit(ev, args):
    if len(EVENTS) < 50 and ev.startswith(WATCH):
        EVENTS.append((ev + " " + " ".join(str(a)[:60] for a in args[1:3] if isinstance(a, (str, int, tuple))))[:160])
sys.addaudithook(_audit)
def emit(kind, obj):
    os.write(REPORT, ("\n" + NONCE + kind + json.dumps(obj) + NONCE + "\n").encode())
try:
    import pytest
except BaseException as exc:
    emit("E", repr(exc))
    os._exit(3)
emit("B", {})
RESULTS = {}
COLLECT = []
RAISED = {}
SKIPS = (pytest.skip.Exception, pytest.xfail.Exception)
class Recorder:
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item):
        outcome = yield
        exc = outcome.excinfo
        if exc is not None and not issubclass(exc[0], SKIPS):
            RAISED[item.nodeid] = exc[0].__name__
    def pytest_runtest_logreport(self, report):
        n, prev = report.nodeid, RESULTS.get(report.nodeid)
        if report.failed:
            RESULTS[n] = "failed" if report.when == "call" else "error"
        elif report.skipped:
            if prev not in ("failed", "error"):
                RESULTS[n] = "xfail" if hasattr(report, "wasxfail") else "skipped"
        elif report.when == "call" and prev is None:
            RESULTS[n] = "passed"
    def pytest_collectreport(self, report):
        if report.failed:
            COLLECT.append(report.nodeid)
code = pytest.main(ARGS, plugins=[Recorder()])
for n in RAISED:  # the test function raised, whatever the (patchable) report machinery says
    if RESULTS.get(n) == "passed":
        RESULTS[n] = "failed"
emit("R", {"results": RESULTS, "collect_errors": COLLECT, "exit": int(code), "events": EVENTS})
os._exit(0)
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
