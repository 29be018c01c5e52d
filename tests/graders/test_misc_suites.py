"""Every labeled suite of the toolcall/instructions/schema/judge/length families is reproduced by its
``bench_verdict`` with 0 false positives and 0 false negatives; errors are counted apart."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

SUITES = Path(__file__).resolve().parents[1] / "suites"
FAMILIES = {"toolcall": 40, "instructions": 40, "schema": 40, "judge": 20, "length": 15}


def _run(module: Any, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """What verifier-bench computes: fp/fn among judged lines, errors kept apart."""
    fp, fn, errors, misses = 0, 0, 0, []
    for line in lines:
        label = line["label"] if "label" in line else line["expect"] == "pass"
        try:
            verdict = module.bench_verdict(line)
        except Exception:
            errors += 1
            continue
        if verdict and not label:
            fp += 1
            misses.append(line["id"])
        elif label and not verdict:
            fn += 1
            misses.append(line["id"])
    return {"fp": fp, "fn": fn, "errors": errors, "misses": misses}


def _load(name: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (SUITES / f"{name}.jsonl").read_text().splitlines() if x.strip()]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_suite_reproduced_exactly(family: str) -> None:
    lines = _load(family)
    assert len(lines) >= FAMILIES[family]
    assert len({line["id"] for line in lines}) == len(lines), "ids must be unique"
    assert all(isinstance(line["label"], bool) for line in lines)
    labels = [line["label"] for line in lines]
    assert any(labels) and not all(labels), "a suite needs both accepted and rejected lines"
    module = importlib.import_module(f"verigym.graders.{family}")
    result = _run(module, lines)
    assert result == {"fp": 0, "fn": 0, "errors": 0, "misses": []}


def test_flipped_label_is_reported_as_a_miss() -> None:
    module = importlib.import_module("verigym.graders.toolcall")
    line = dict(_load("toolcall")[0])
    line["label"] = not line["label"]
    assert _run(module, [line])["misses"] == [line["id"]]


def test_errors_are_counted_apart_from_wrong_verdicts() -> None:
    judge = importlib.import_module("verigym.graders.judge")
    length = importlib.import_module("verigym.graders.length")
    instructions = importlib.import_module("verigym.graders.instructions")
    bad_rubric = {"id": "j", "label": False, "prompt": "p", "response": "r", "rubric": [{"points": 1}]}
    assert _run(judge, [bad_rubric]) == {"fp": 0, "fn": 0, "errors": 1, "misses": []}
    bad_len = {"id": "l", "label": True, "kind": "overlong", "length": 10, "max_len": 5, "cache_len": 9}
    assert _run(length, [bad_len])["errors"] == 1
    wrong_expected = {
        "id": "l2",
        "label": True,
        "kind": "overlong",
        "length": 1,
        "max_len": 5,
        "cache_len": 2,
    }
    wrong_expected["expected"] = -0.5
    assert _run(length, [wrong_expected])["errors"] == 1
    unknown = {"id": "i", "label": False, "response": "x", "instructions": [{"id": "nope:nothing"}]}
    assert _run(instructions, [unknown]) == {"fp": 0, "fn": 0, "errors": 1, "misses": []}


def test_judge_bench_garbage_judge_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    judge = importlib.import_module("verigym.graders.judge._rubric_judge")
    monkeypatch.setattr(judge, "quoted_phrase_verdict", lambda messages: "I think so, maybe.")
    line = _load("judge")[0]
    with pytest.raises(judge.JudgeError, match="unparseable"):
        judge.bench_verdict(line)
