"""Docker runtime for ``swe_instances``: run an instance's tests in a container instead of bubblewrap.

``docker_status()`` says whether a Docker engine answers (the CLI alone is not enough);
``grade_in_docker`` prepares the tree exactly as the bubblewrap path does (protected files reset,
added test files removed, hidden tests written over; ``graders.code.swe.prepare_tree``), copies it into
a fresh container with no network, runs ``python -m pytest`` with a JUnit report and reads the
outcome of every FAIL_TO_PASS / PASS_TO_PASS test from that report. The image must have the
repository's dependencies and pytest (``image=`` per instance or for the environment).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

from verigym.graders.code.swe import SweResult, framework_refs, prepare_tree

__all__ = ["docker_status", "grade_in_docker"]

_REPORT = ".verigym-junit.xml"


def docker_status(timeout_s: float = 10.0) -> str | None:
    """None when a Docker engine answers, else a one-line reason."""
    exe = shutil.which("docker")
    if exe is None:
        return "the docker command is not installed"
    try:
        run = subprocess.run(
            [exe, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return "the Docker engine did not answer 'docker info' in time"
    if run.returncode != 0 or not run.stdout.strip():
        why = (run.stderr.strip().splitlines() or ["no server version"])[-1]
        return f"no Docker engine answers ({why[:160]})"
    return None


def _junit_key(node_id: str) -> tuple[str, str]:
    """A pytest node id as JUnit's (classname, name): ``a/test_x.py::TestA::test_b[1]`` →
    (``a.test_x.TestA``, ``test_b[1]``)."""
    parts = node_id.split("::")
    module = parts[0].removesuffix(".py").replace("/", ".")
    return ".".join([module, *parts[1:-1]]), parts[-1]


def _statuses(report: Path, node_ids: Sequence[str]) -> dict[str, str]:
    """passed/failed/error/skipped for each of ``node_ids`` found in a JUnit report."""
    seen: dict[tuple[str, str], str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        if case.find("failure") is not None:
            seen[key] = "failed"
        elif case.find("error") is not None:
            seen[key] = "error"
        elif case.find("skipped") is not None:
            seen[key] = "skipped"
        else:
            seen[key] = "passed"
    return {n: seen[_junit_key(n)] for n in node_ids if _junit_key(n) in seen}


def grade_in_docker(
    image: str,
    files_before: Mapping[str, str],
    files_after: Mapping[str, str],
    hidden_tests: Mapping[str, str],
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    *,
    timeout_s: float = 300.0,
) -> SweResult:
    """Grade one instance in a container (see the module docstring); infrastructure trouble is
    ``SweResult.error``, anything the candidate's code causes is a fail with a reason."""
    result = SweResult(
        fail_to_pass=dict.fromkeys(fail_to_pass, "missing"),
        pass_to_pass=dict.fromkeys(pass_to_pass, "missing"),
    )
    tree, result.reset_files, result.removed_files = prepare_tree(files_before, files_after, hidden_tests)
    touched = framework_refs(files_before, tree, hidden_tests)
    if touched:
        result.reason = f"the change reaches into the test run: {', '.join(touched[:3])}"
        return result
    why = docker_status()
    if why is not None:
        result.error = f"runtime=docker: {why}"
        return result
    targets = sorted({t.split("::")[0] for t in [*fail_to_pass, *pass_to_pass] if t.split("::")[0] in tree})
    with tempfile.TemporaryDirectory(prefix="verigym-swe-") as tmp:
        root = Path(tmp)
        for path, text in tree.items():
            dest = root / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
        cmd = ["docker", "run", "--rm", "--network", "none", "-v", f"{root}:/repo", "-w", "/repo", image,
               "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml=/repo/{_REPORT}", *targets]  # fmt: skip
        start = time.perf_counter()
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            result.reason = f"the test run took longer than {timeout_s:.0f}s"
            return result
        result.wall_s = time.perf_counter() - start
        result.log = (run.stdout + run.stderr)[-4000:]
        report = root / _REPORT
        if not report.is_file():
            result.error = (
                f"pytest wrote no report in image {image!r} (exit {run.returncode}): {result.log[-200:]}"
            )
            return result
        statuses = _statuses(report, [*fail_to_pass, *pass_to_pass])
    for table in (result.fail_to_pass, result.pass_to_pass):
        for test_id in table:
            table[test_id] = statuses.get(test_id, "missing")
    every = [*result.fail_to_pass.values(), *result.pass_to_pass.values()]
    result.resolved = bool(every) and all(s == "passed" for s in every)
    if not result.resolved:
        bad = [
            f"{t}: {s}" for t, s in {**result.fail_to_pass, **result.pass_to_pass}.items() if s != "passed"
        ]
        result.reason = "; ".join(bad[:3])
    return result
