"""The reasoning-gym bridge, against a tiny local stand-in for ``reasoning_gym`` and the real package.

reasoning-gym is an optional extra (``verigym[rg]``), so the bridge is tested first with a stand-in
module implementing its dataset interface (``create_dataset(name, size=, seed=)``, items
``{"question", "answer", "metadata"}``, ``dataset.score_answer(answer, entry)``) put in
``sys.modules``; when the real package is installed (reasoning-gym 0.1.25 in the developers' .venv),
real datasets are checked too, and without it the ``rg:`` name must be a one-line error.
"""

from __future__ import annotations

import asyncio
import random
import sys
import types
from typing import Any

import pytest

from verigym.envs.builtin.rg import extract_answer
from verigym.envs.check import check_env
from verigym.envs.dataset_env import DatasetEnv
from verigym.envs.datasets import from_records
from verigym.envs.registry import EnvArgError, env_arguments, load_env
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Grader, Rubric
from verigym.types import Sampling, Score


class SumsDataset:
    """reasoning-gym's interface: indexable items, ``score_answer`` reading the item's metadata."""

    def __init__(self, size: int, seed: int, max_n: int = 50) -> None:
        rng = random.Random(seed)
        self.items = []
        for i in range(size):
            a, b = rng.randint(1, max_n), rng.randint(1, max_n)
            meta = {"terms": (a, b), "source_index": i}  # a tuple: the bridge must pass the original
            self.items.append({"question": f"What is {a} + {b}?", "answer": str(a + b), "metadata": meta})
        self.scored: list[Any] = []

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Any:
        return iter(self.items)

    def score_answer(self, answer: str | None, entry: dict[str, Any]) -> float:
        self.scored.append(entry["metadata"]["terms"])
        if answer is None:
            return 0.0
        return 1.0 if answer.strip() == str(sum(entry["metadata"]["terms"])) else 0.01


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> dict[str, SumsDataset]:
    made: dict[str, SumsDataset] = {}
    module = types.ModuleType("reasoning_gym")

    def create_dataset(name: str, **kwargs: Any) -> SumsDataset:
        if name != "sums":
            raise ValueError(f"Dataset {name!r} not registered")
        made[name] = SumsDataset(**kwargs)
        return made[name]

    module.create_dataset = create_dataset  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "reasoning_gym", module)
    return made


def score_reply(env: DatasetEnv, reply: str) -> Score:
    task = env.tasks()[0]

    async def run() -> Score:
        traj = await env.rollout(task, ScriptedPolicy(lambda m: reply), Sampling())
        return await env.rubric.score(task, traj)

    return asyncio.run(run())


def test_rg_name_loads_and_passes_check_env(standin: dict[str, SumsDataset]) -> None:
    env = load_env("rg:sums", size=6, seed=2, max_n=9)
    assert isinstance(env, DatasetEnv) and env.name == "rg:sums"
    report = check_env(env, n=6)
    assert report.ok, report.failures
    assert "max_n" not in env_arguments("bfcl") and "config" in env_arguments("rg:sums")
    assert standin["sums"].scored and isinstance(standin["sums"].scored[0], tuple)  # original entry


def test_answers_are_scored_by_the_datasets_own_score_answer(standin: dict[str, SumsDataset]) -> None:
    env = load_env("rg:sums", size=3, seed=1)
    right = env.tasks()[0].answer
    assert score_reply(env, f"<think>maybe 3</think>It is <answer>{right}</answer>").reward == 1.0
    assert score_reply(env, "<answer>-1</answer>").reward == 0.01  # partial credit passes through
    assert score_reply(env, "").reward == 0.0
    assert extract_answer("<answer>1</answer> then <answer> 2 </answer>") == "2"


def test_missing_package_and_unknown_dataset_are_one_line_errors(
    standin: dict[str, SumsDataset], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(EnvArgError, match="rg:nope: create_dataset failed"):
        load_env("rg:nope")
    with pytest.raises(EnvArgError, match="size must be a positive integer"):
        load_env("rg:sums", size=0)
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    with pytest.raises(EnvArgError, match=r"reasoning-gym is not installed \(pip install reasoning-gym\)"):
        load_env("rg:sums")


def test_public_info_keys_is_a_constructor_argument() -> None:
    tasks = from_records(
        [{"question": "Count the legs of 3 spiders.", "answer": "24", "restated": "3 spiders"}]
    )
    rubric = Rubric([Grader(lambda t, tr: tr.final_text == t.answer)])
    hidden = check_env(DatasetEnv(tasks, rubric=rubric), n=1)
    assert any(r.name == "hidden-info" and r.status == "fail" for r in hidden.results)
    public = DatasetEnv(tasks, rubric=rubric, public_info_keys=("restated",))
    assert public.public_info_keys == ("restated",)
    assert check_env(public, n=1).ok


def test_the_real_package_when_installed() -> None:
    """With reasoning-gym installed (the ``rg`` extra), real datasets pass check-env: the oracle's
    answers score 1 with their own ``score_answer``; without it the name is a one-line error."""
    try:
        import reasoning_gym  # noqa: F401
    except ModuleNotFoundError:
        with pytest.raises(EnvArgError, match="reasoning-gym is not installed"):
            load_env("rg:leg_counting")
        return
    for name in ("leg_counting", "basic_arithmetic", "word_sorting"):
        report = check_env(load_env(f"rg:{name}", size=8, seed=3), n=8)
        assert report.ok, (name, report.failures)
