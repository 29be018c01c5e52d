"""Tasks from JSONL / Parquet / records, malformed rows, and seeded procedural generation."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verigym.envs.dataset_env import DatasetEnv
from verigym.envs.datasets import (
    DatasetError,
    from_records,
    load_jsonl,
    load_parquet,
    load_tasks,
    procedural_tasks,
    split_of,
)
from verigym.types import Message, Task

ROWS = [
    {"q": "2+2?", "a": 4, "uid": "x1", "source": "gsm"},
    {
        "q": [{"role": "system", "content": "terse"}, {"role": "user", "content": "3+3?"}],
        "a": "6",
        "uid": "x2",
        "source": "m",
    },
]


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_jsonl_field_mapping(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [json.dumps(r) for r in ROWS[:1]] + ["", json.dumps(ROWS[1])])
    tasks = load_jsonl(path, question="q", answer="a", id="uid")
    assert [t.id for t in tasks] == ["x1", "x2"]
    assert tasks[0].prompt == (Message(role="user", content="2+2?"),) and tasks[0].answer == "4"
    assert tasks[0].info == {"source": "gsm"}
    assert [m.role for m in tasks[1].prompt] == ["system", "user"]
    only = load_tasks(path, question="q", answer="a", info=["source"], template="Q: {q} ({source})")
    assert only[0].id == "qa-0" and only[0].prompt[0].content == "Q: 2+2? (gsm)"
    assert only[0].info == {"source": "gsm"}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"question": "a", "answer": "1"}', '{"question": "b"'], r"qa.jsonl:2: invalid JSON"),
        (
            ['{"question": "a", "answer": "1"}', '{"prompt": "b", "answer": "2"}'],
            r"qa.jsonl:2: missing field 'question'",
        ),
        (['{"question": "a"}'], r"qa.jsonl:1: missing field 'answer' \(row has: question\)"),
        (
            ['{"question": 5, "answer": "1"}'],
            r"qa.jsonl:1: field 'question' must be a string or a list of messages",
        ),
        (['{"question": "a", "answer": null}'], r"qa.jsonl:1: field 'answer' must be a string or a number"),
        (["[1, 2]"], r"qa.jsonl:1: expected an object"),
    ],
)
def test_malformed_rows_name_file_line_and_field(tmp_path: Path, lines: list[str], message: str) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", lines)
    with pytest.raises(DatasetError, match=message) as info:
        load_jsonl(path)
    assert "\n" not in str(info.value)


def test_duplicate_ids_and_missing_files(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", ['{"question": "a", "answer": 1, "id": 7}'] * 2)
    with pytest.raises(DatasetError, match=r"d.jsonl:2: duplicate id '7' \(first at .*d.jsonl:1\)"):
        load_jsonl(path, id="id")
    with pytest.raises(DatasetError, match="no such file"):
        load_jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(DatasetError, match="unknown dataset format"):
        load_tasks(tmp_path / "x.csv")


def test_parquet(tmp_path: Path) -> None:
    path = tmp_path / "qa.parquet"
    pq.write_table(pa.table({"question": ["1+1?", "2+1?"], "answer": [2, 3], "level": [1, 2]}), path)
    tasks = load_parquet(path)
    assert [(t.prompt[0].content, t.answer, t.info) for t in tasks] == [
        ("1+1?", "2", {"level": 1}),
        ("2+1?", "3", {"level": 2}),
    ]
    with pytest.raises(
        DatasetError, match=r"qa.parquet: missing column 'solution' \(columns: question, answer, level\)"
    ):
        load_parquet(path, answer="solution")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(DatasetError, match="not a readable Parquet file"):
        load_parquet(bad)


def test_records_like_hf_datasets() -> None:
    class FakeDataset:  # the duck type of datasets.Dataset: iterable of dicts
        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter([{"question": "hi", "answer": "yo", "meta": {"k": [1, 2]}}])

    tasks = from_records(FakeDataset(), source="hf")
    assert tasks[0].id == "hf-0" and tasks[0].info == {"meta": {"k": [1, 2]}}
    assert from_records([{"question": "q"}], answer=None)[0].answer is None
    with pytest.raises(DatasetError, match="hf:0: missing field 'question'"):
        from_records([{"text": "q"}], source="hf")


def gen(rng: random.Random) -> Task:
    a, b = rng.randint(0, 30), rng.randint(0, 30)
    return Task(id="", prompt=(Message(role="user", content=f"{a}+{b}"),), answer=str(a + b))


def test_procedural_is_deterministic_per_seed_and_index() -> None:
    first = procedural_tasks(gen, 20, seed=1, name="g")
    assert first == procedural_tasks(gen, 20, seed=1, name="g")
    assert procedural_tasks(gen, 5, seed=1, name="g") == first[:5]  # task i does not depend on n
    assert first != procedural_tasks(gen, 20, seed=2, name="g")
    assert first[3].id == "g-test-1-3"


def test_procedural_splits_never_share_a_task() -> None:
    train = {
        t.prompt[0].content
        for s in range(3)
        for t in procedural_tasks(gen, 200, seed=s, split="train", name="g")
    }
    test = {
        t.prompt[0].content
        for s in range(3)
        for t in procedural_tasks(gen, 100, seed=s, split="test", name="g")
    }
    assert train and test and not train & test
    assert all(split_of(f"user:{p}") == "test" for p in test)
    with pytest.raises(DatasetError, match="unknown split 'dev'"):
        procedural_tasks(gen, 1, split="dev")

    def tiny(rng: random.Random) -> Task:
        return Task(id="", prompt=(Message(role="user", content="same"),))

    with pytest.raises(DatasetError, match="too small"):
        procedural_tasks(
            tiny, 1, split="train" if split_of("user:same") == "test" else "test", max_attempts=5
        )


async def test_dataset_env(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "qa.jsonl", ['{"question": "a?", "answer": "1"}', '{"question": "b?", "answer": "2"}']
    )
    env = DatasetEnv(path, name="qa", shuffle=True)
    assert env._splits is None  # nothing read at construction
    tasks = env.tasks(seed=3)
    assert sorted(t.id for t in tasks) == ["qa-0", "qa-1"] and env.tasks(1, seed=3) == tasks[:1]
    oracle = env.oracle_policy()
    assert oracle is not None
    from verigym.types import Sampling

    got = await oracle.complete([Message(role="system", content="s"), *tasks[0].prompt], sampling=Sampling())
    assert got.text == tasks[0].answer
    with pytest.raises(DatasetError, match="no split 'train'"):
        env.tasks(split="train")
