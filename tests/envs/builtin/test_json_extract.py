"""The json_extract environment: generated texts, schemas, field grading, levels."""

from __future__ import annotations

import json
import random

import pytest

from verigym.envs.builtin.json_extract import JsonExtractEnv, make_entity
from verigym.envs.check import check_env
from verigym.envs.registry import EnvArgError, load_env
from verigym.types import Message, Trajectory, Turn


def reply(text: str) -> Trajectory:
    return Trajectory(
        task_id="t",
        prompt=[],
        turns=[Turn(source="model", messages=[Message(role="assistant", content=text)])],
    )


@pytest.mark.parametrize("level", [1, 3])
def test_check_env_passes(level: int) -> None:
    report = check_env(load_env("json_extract", level=level), n=6)
    assert report.ok, report.failures


def test_levels_shape_the_objects() -> None:
    rng = random.Random(0)
    easy, text = make_entity(rng, "person", 1)
    assert sorted(easy) == ["age", "name", "occupation"] and str(easy["age"]) in text
    hard, text = make_entity(rng, "company", 3)
    assert isinstance(hard["products"], list) and isinstance(hard["office"], dict)
    assert f"{hard['employees']:,}" in text  # separators at level 3
    assert text.count(". ") + 1 == (len(hard) - 1) + 2 * 2  # own facts plus two distractors x 2


async def test_wrong_field_and_invalid_document_score_partially() -> None:
    env = JsonExtractEnv(level=2)
    task = env.tasks(1, seed=5)[0]
    expected = json.loads(task.answer or "")
    perfect = await env.rubric.score(task, reply(json.dumps(expected)))
    assert perfect.reward == pytest.approx(1.0)
    key = next(k for k, v in expected.items() if isinstance(v, int) and not isinstance(v, bool))
    wrong = dict(expected, **{key: expected[key] + 1})
    score = await env.rubric.score(task, reply(f"Here it is: {json.dumps(wrong)}"))
    assert score.grades["schema"].score == 1.0
    assert score.grades["fields"].score == pytest.approx((len(expected) - 1) / len(expected))
    missing = {k: v for k, v in expected.items() if k != key}
    partial = await env.rubric.score(task, reply(json.dumps(missing)))
    assert 0 < partial.grades["schema"].score < 1
    prose = await env.rubric.score(task, reply("no json here"))
    assert prose.reward == 0.0 and prose.error is None


def test_bad_level() -> None:
    with pytest.raises(EnvArgError, match="level"):
        JsonExtractEnv(level=0)
