"""SWE-style repository grading: patch application, protected files, pytest in the sandbox."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from verigym.graders.code import bench_verdict
from verigym.graders.code.swe import (
    PatchError,
    apply_patch,
    grade_repo,
    is_protected,
    is_test_path,
    prepare_tree,
    swe_grader,
)
from verigym.rubric import Rubric
from verigym.types import Message, Task, Trajectory, Turn

SUITE = Path(__file__).resolve().parents[2] / "suites" / "code_swe.jsonl"
BEFORE = {
    "m/__init__.py": "",
    "m/ops.py": "def inc(x):\n    return x\n",
    "tests/test_ops.py": "from m.ops import inc\n",
}
HIDDEN = {
    "tests/test_ops.py": "from m.ops import inc\n\n\ndef test_inc():\n    assert inc(1) == 2\n\n\ndef test_type():\n    assert isinstance(inc(1), int)\n"
}
FIX = "--- a/m/ops.py\n+++ b/m/ops.py\n@@ -1,2 +1,2 @@\n def inc(x):\n-    return x\n+    return x + 1\n"


def test_apply_patch_add_change_delete_and_errors() -> None:
    files = {"a.txt": "1\n2\n3\n", "gone.txt": "x\n"}
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n"
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+new\n"
        "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    )
    assert apply_patch(files, patch) == {"a.txt": "1\ntwo\n3\n", "new.txt": "new\n"}
    with pytest.raises(PatchError):
        apply_patch(files, "--- a/a.txt\n+++ b/a.txt\n@@ -1,1 +1,1 @@\n-nope\n+yes\n")
    with pytest.raises(PatchError):
        apply_patch(files, "not a diff")


def test_protected_paths_and_tree_preparation() -> None:
    assert is_test_path("tests/test_x.py") and is_test_path("pkg/x_test.py") and is_test_path("conftest.py")
    assert not is_test_path("pkg/testing_utils.py")
    assert (
        is_protected("pytest.ini")
        and is_protected(".github/workflows/ci.yml")
        and not is_protected("pkg/a.py")
    )
    after = {
        **BEFORE,
        "tests/test_ops.py": "def test_inc():\n    pass\n",
        "tests/test_new.py": "x",
        "m/ops.py": "y",
    }
    tree, reset, removed = prepare_tree(BEFORE, after, HIDDEN)
    assert reset == ["tests/test_ops.py"] and removed == ["tests/test_new.py"]
    assert tree["tests/test_ops.py"] == HIDDEN["tests/test_ops.py"] and tree["m/ops.py"] == "y"


def test_grade_repo_resolved_and_not() -> None:
    good = grade_repo(
        BEFORE,
        None,
        patch=FIX,
        hidden_tests=HIDDEN,
        fail_to_pass=["tests/test_ops.py::test_inc"],
        pass_to_pass=["tests/test_ops.py::test_type"],
    )
    assert good.resolved and good.error is None and good.fraction == 1.0
    bad = grade_repo(
        BEFORE,
        BEFORE,
        hidden_tests=HIDDEN,
        fail_to_pass=["tests/test_ops.py::test_inc"],
        pass_to_pass=["tests/test_ops.py::test_type", "tests/test_ops.py::test_missing"],
    )
    assert not bad.resolved and bad.fail_to_pass["tests/test_ops.py::test_inc"] == "failed"
    assert bad.pass_to_pass["tests/test_ops.py::test_missing"] == "missing"


async def test_swe_grader_in_a_rubric_reads_state_files_or_diff() -> None:
    task = Task(
        id="r",
        prompt=(Message(role="user", content="fix inc"),),
        info={"repo_files": BEFORE, "hidden_tests": HIDDEN, "fail_to_pass": ["tests/test_ops.py::test_inc"]},
    )
    msg = Message(role="assistant", content=f"Here is the fix:\n```diff\n{FIX}```")
    traj = Trajectory(task_id="r", prompt=list(task.prompt), turns=[Turn(source="model", messages=[msg])])
    score = await Rubric(graders=[swe_grader()]).score(task, traj)
    assert score.reward == 1.0, score
    traj2 = Trajectory(task_id="r", prompt=list(task.prompt), state={"files": BEFORE})
    score2 = await Rubric(graders=[swe_grader()]).score(task, traj2)
    assert score2.reward == 0.0 and score2.error is None
    broken = Task(id="b", prompt=task.prompt, info={"repo_files": BEFORE})
    assert (await Rubric(graders=[swe_grader()]).score(broken, traj)).error is not None


def test_swe_suite_has_no_misses() -> None:
    lines = [json.loads(x) for x in SUITE.read_text().splitlines() if x.strip()]
    assert len(lines) >= 15
    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(bench_verdict, lines))
    misses = [ln["id"] for ln, v in zip(lines, verdicts, strict=True) if v != (ln["expect"] == "pass")]
    assert not misses, misses
