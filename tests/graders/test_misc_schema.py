"""Structured output: parsing four formats, jsonschema validation, partial credit, field checks."""

from __future__ import annotations

import math

import pytest

from verigym.graders.schema import (
    ParseError,
    fields_grader,
    parse_structured,
    required_paths,
    schema_grader,
    schema_score,
)
from verigym.rubric import Rubric
from verigym.types import Completion, Message, Task, Trajectory, Turn

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
            "required": ["city", "zip"],
        },
    },
    "required": ["name", "address"],
}


def _traj(text: str) -> Trajectory:
    c = Completion(text=text)
    return Trajectory(
        task_id="t",
        prompt=[Message(role="user", content="q")],
        turns=[Turn(source="model", messages=[c.as_message()], completion=c)],
    )


def _task(**kw: object) -> Task:
    return Task(id="t", prompt=(Message(role="user", content="q"),), **kw)  # type: ignore[arg-type]


def test_parse_each_format() -> None:
    assert parse_structured('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_structured("a: 1\nok: no\n", "yaml") == {"a": 1, "ok": "no"}
    assert parse_structured("a = 1\n[b]\nc = true\n", "toml") == {"a": 1, "b": {"c": True}}
    assert parse_structured("x,y\n1,2.5\nfoo,\n", "csv") == [{"x": 1, "y": 2.5}, {"x": "foo", "y": ""}]
    assert parse_structured("x\n007\n", "csv", coerce=False) == [{"x": "007"}]
    assert parse_structured('<r a="1"><x>2</x><x>y</x></r>', "xml") == {"r": {"@a": 1, "x": [2, "y"]}}
    with pytest.raises(ParseError, match="DTD"):
        parse_structured('<!DOCTYPE r [<!ENTITY e "x">]><r>&e;</r>', "xml")
    with pytest.raises(ParseError, match="different JSON documents"):
        parse_structured('{"a": 1} or {"a": 2}')
    with pytest.raises(ParseError):
        parse_structured('prefix {"a": 1}', extract=False)
    with pytest.raises(ParseError):
        parse_structured("a = = 1", "toml")


def test_required_paths_recurse() -> None:
    assert required_paths(SCHEMA) == [("name",), ("address",), ("address", "city"), ("address", "zip")]


def test_partial_credit_and_all_or_nothing() -> None:
    assert schema_score({"name": "A", "address": {"city": "P", "zip": "1"}}, SCHEMA)[0] == 1.0
    score, detail = schema_score({"name": "A", "address": {"city": "P"}}, SCHEMA)
    assert score == pytest.approx(3 / 4) and "3/4" in detail
    assert schema_score({"name": "A", "address": {"city": "P"}}, SCHEMA, partial=False)[0] == 0.0
    # every required path present but still invalid: never a full score
    score, _ = schema_score({"name": 5, "address": {"city": "P", "zip": "1"}}, SCHEMA)
    assert score == pytest.approx(3 / 4)
    extra = dict(SCHEMA, additionalProperties=False)
    score, _ = schema_score({"name": "A", "address": {"city": "P", "zip": "1"}, "x": 1}, extra)
    assert 0 < score < 1


async def test_schema_grader_from_task_info_and_errors() -> None:
    g = schema_grader()
    task = _task(info={"schema": SCHEMA})
    ok = await g.grade(
        task, _traj('Sure:\n```json\n{"name": "A", "address": {"city": "P", "zip": "1"}}\n```')
    )
    assert ok.score == 1.0
    junk = await g.grade(task, _traj("I refuse."))
    assert junk.ok and junk.score == 0.0 and "unparseable" in junk.detail
    broken = await g.grade(_task(info={"schema": {"type": "nonsense"}}), _traj("{}"))
    assert not broken.ok and math.isnan(broken.score)
    score = await Rubric([schema_grader()]).score(_task(), _traj("{}"))
    assert score.reward is None and "schema" in (score.error or "")
    with pytest.raises(Exception, match="nonsense"):
        schema_grader({"type": "nonsense"})


async def test_yaml_grader() -> None:
    g = schema_grader(SCHEMA, "yaml")
    text = "name: A\naddress:\n  city: P\n  zip: '01'\n"
    assert (await g.grade(_task(), _traj(text))).score == 1.0
    unquoted = "name: A\naddress:\n  city: P\n  zip: 01\n"  # YAML reads 01 as an int
    assert (await g.grade(_task(), _traj(unquoted))).score < 1.0


async def test_fields_grader() -> None:
    g = fields_grader()
    task = _task(answer='{"name": "Ada", "address": {"city": "Paris", "zip": "75001"}}')
    got = await g.grade(
        task, _traj('{"name": "ada", "address": {"city": "Lyon", "zip": "75001"}, "extra": 1}')
    )
    assert got.score == pytest.approx(2 / 3) and "/address/city" in got.detail
    strict = fields_grader(partial=False, exact=True)
    assert (
        await strict.grade(
            task, _traj('{"name": "Ada", "address": {"city": "Paris", "zip": "75001"}, "x": 1}')
        )
    ).score == 0.0
    by_info = await fields_grader().grade(_task(info={"expected": {"n": 2}}), _traj('{"n": 2.0}'))
    assert by_info.score == 1.0
    no_gold = await fields_grader().grade(_task(), _traj("{}"))
    assert not no_gold.ok


async def test_json_in_reasoning_is_ignored() -> None:
    g = schema_grader(SCHEMA)
    text = '<think>draft {"name": 1}</think>{"name": "A", "address": {"city": "P", "zip": "1"}}'
    assert (await g.grade(_task(), _traj(text))).score == 1.0
