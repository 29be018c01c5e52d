"""The swe_instances environment on the fixture instances (local repositories, bubblewrap)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from verigym.envs.builtin._swe_docker import docker_status
from verigym.envs.builtin.swe_instances import SweInstancesEnv, load_instances
from verigym.envs.check import check_env
from verigym.envs.datasets import DatasetError
from verigym.envs.registry import EnvArgError, load_env
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Sampling, Score

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "swe_instances" / "instances.json"

CHEAT = "\n".join(
    [
        "```diff",
        "--- a/tests/test_stats.py",
        "+++ b/tests/test_stats.py",
        "@@ -8,4 +8,4 @@",
        " ",
        " ",
        " def test_median_odd():",
        "-    assert median([3, 1, 2]) == 2",
        "+    assert True",
        "```",
    ]
)


def score_reply(reply: str, index: int = 1) -> Score:
    env = SweInstancesEnv(path=str(FIXTURE))
    task = env.tasks()[index]

    async def run() -> Score:
        traj = await env.rollout(task, ScriptedPolicy(lambda m: reply), Sampling())
        return await env.rubric.score(task, traj)

    return asyncio.run(run())


def test_check_env_passes_on_the_fixture_instances() -> None:
    report = check_env(load_env("swe_instances", path=str(FIXTURE)), n=3)
    assert report.ok, report.failures
    details = {r.name: r.detail for r in report.results}
    assert "1.100" in details["oracle"] and "0.000" in details["null"]  # resolved 1 + a clean patch 0.1


def test_instances_read_swe_bench_fields() -> None:
    tasks = load_instances(FIXTURE)
    assert [t.id for t in tasks] == ["textkit__textkit-1", "numkit__numkit-2"]
    first = tasks[0]
    assert first.info["fail_to_pass"] == ["tests/test_slug.py::test_repeated_spaces",
                                          "tests/test_slug.py::test_surrounding_spaces"]  # fmt: skip
    assert list(first.info["hidden_tests"]) == ["tests/test_slug.py"]
    assert "test_repeated_spaces" not in first.prompt[0].content  # hidden tests stay hidden
    assert "def slugify" in first.prompt[0].content


def test_editing_the_tests_is_reset_and_fails() -> None:
    score = score_reply(CHEAT)
    assert score.reward == 0.0 and score.error is None
    assert "reset 1" in next(iter(score.grades.values())).detail


def test_a_patch_that_does_not_apply_is_a_fail() -> None:
    score = score_reply("```diff\n--- a/numkit/nope.py\n+++ b/numkit/nope.py\n@@ -1 +1 @@\n-a\n+b\n```")
    assert score.reward == 0.0 and score.error is None


def test_docker_runtime_needs_an_engine() -> None:
    why = docker_status()
    if why is None:
        assert SweInstancesEnv(path=str(FIXTURE), runtime="docker", image="python:3.11").runtime == "docker"
    else:
        with pytest.raises(EnvArgError, match="runtime=docker but") as err:
            SweInstancesEnv(path=str(FIXTURE), runtime="docker")
        assert "\n" not in str(err.value)


def test_bad_instances_are_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "inst.json"
    path.write_text(json.dumps([{"instance_id": "x", "problem_statement": "p", "FAIL_TO_PASS": [],
                                 "test_patch": "", "repo_dir": "nowhere"}]))  # fmt: skip
    with pytest.raises(DatasetError, match=r"inst.json\[0\]: repository directory .*nowhere does not exist"):
        load_instances(path)
    path.write_text(json.dumps([{"instance_id": "x", "problem_statement": "p"}]))
    with pytest.raises(DatasetError, match="missing field 'FAIL_TO_PASS'"):
        load_instances(path)
    with pytest.raises(EnvArgError, match="runtime must be one of"):
        SweInstancesEnv(path=str(FIXTURE), runtime="podman")


def test_docker_runtime_reads_pytest_junit_reports(tmp_path: Path) -> None:
    """The docker path's report reader (the engine itself is not available on CI machines)."""
    from verigym.envs.builtin._swe_docker import _statuses

    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_slug" name="test_basic" time="0.001"/>'
        '<testcase classname="tests.test_slug" name="test_repeated_spaces"><failure message="x"/></testcase>'
        '<testcase classname="tests.test_slug" name="test_surrounding_spaces"><skipped/></testcase>'
        '<testcase classname="tests.test_slug" name="test_other"><error message="boom"/></testcase>'
        '<testcase classname="tests.sub.test_k.TestK" name="test_p[1]"/>'
        "</testsuite></testsuites>"
    )
    ids = [
        "tests/test_slug.py::test_basic",
        "tests/test_slug.py::test_repeated_spaces",
        "tests/test_slug.py::test_surrounding_spaces",
        "tests/test_slug.py::test_other",
        "tests/sub/test_k.py::TestK::test_p[1]",
        "tests/test_slug.py::test_never_ran",
    ]
    assert _statuses(report, ids) == {
        ids[0]: "passed",
        ids[1]: "failed",
        ids[2]: "skipped",
        ids[3]: "error",
        ids[4]: "passed",
    }
