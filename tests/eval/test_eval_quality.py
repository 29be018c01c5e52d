"""Benchmark-quality measures on synthetic runs whose pass rates are known by construction."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from verigym.eval.quality import (
    distinct_n,
    hardness,
    kendall_tau,
    noise,
    pass_table,
    quality_report,
    separability,
)


def _records(rates: dict[str, float], k: int = 4) -> list[dict[str, Any]]:
    """k samples per task; the first round(rate*k) pass."""
    out = []
    for task, rate in rates.items():
        for i in range(k):
            reward = 1.0 if i < round(rate * k) else 0.0
            out.append(
                {
                    "task_id": task,
                    "sample_index": i,
                    "score": {"reward": reward},
                    "trajectory": {"prompt": [{"role": "user", "content": f"question {task}"}]},
                }
            )
    return out


def test_pass_table_keeps_errors_out_of_rates() -> None:
    recs = [*_records({"a": 0.5}), {"task_id": "a", "sample_index": 9, "score": {"reward": None}}]
    table, errors = pass_table({"m": recs})
    assert table["m"]["a"] == 0.5
    assert errors["m"] == 1


def test_hardness_counts_unsolved_and_solved_by_all() -> None:
    table = {
        "m1": {"t1": 0.0, "t2": 1.0, "t3": 0.5, "t4": 0.0},
        "m2": {"t1": 0.0, "t2": 0.75, "t3": 0.0, "t4": 0.25},
    }
    h = hardness(table)
    assert h["n_tasks"] == 4
    assert h["share_unsolved_by_all"] == pytest.approx(0.25)  # only t1
    assert h["share_solved_by_all"] == pytest.approx(0.25)  # only t2
    # pooled rates: 0, .875, .25, .125 -> mean .3125
    assert h["mean_pass_rate"] == pytest.approx(0.3125)
    assert sum(h["histogram"]) == 4 and h["histogram"][0] == 1 and h["histogram"][8] == 1


def test_separability_separates_distant_models_only() -> None:
    rng = random.Random(0)
    tasks = [f"t{i}" for i in range(200)]
    strong = {t: float(rng.random() < 0.9) for t in tasks}
    weak = {t: float(rng.random() < 0.2) for t in tasks}
    weak_twin = {t: float(rng.random() < 0.2) for t in tasks}
    result = separability({"strong": strong, "weak": weak, "weak2": weak_twin}, n_boot=400)
    by_pair = {(p["a"], p["b"]): p["separated"] for p in result["pairs"]}
    assert by_pair[("strong", "weak")] and by_pair[("strong", "weak2")]
    assert not by_pair[("weak", "weak2")]
    assert result["share_separated"] == pytest.approx(2 / 3)
    assert 0.0 < result["rank_stability_tau"] <= 1.0


def test_kendall_tau_hand_values() -> None:
    assert kendall_tau([1, 2, 3], [1, 2, 3]) == 1.0
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)


def test_distinct_n_and_noise() -> None:
    assert distinct_n(["a b a b"], 1) == pytest.approx(0.5)
    assert distinct_n(["a b a b"], 2) == pytest.approx(2 / 3)
    same = noise({"a": 1.0, "b": 0.0}, {"a": 1.0, "b": 0.0})
    assert same["flip_rate"] == 0.0 and same["pearson_r"] == pytest.approx(1.0)
    flipped = noise({"a": 1.0, "b": 0.0, "c": 1.0}, {"a": 0.0, "b": 0.0, "c": 1.0})
    assert flipped["flip_rate"] == pytest.approx(1 / 3)
    assert math.isnan(noise({}, {})["pearson_r"])


def test_quality_report_end_to_end() -> None:
    runs = {
        "init": _records({"t1": 0.0, "t2": 0.25, "t3": 0.0}),
        "sft": _records({"t1": 0.5, "t2": 0.75, "t3": 0.25}),
        "rl": _records({"t1": 1.0, "t2": 1.0, "t3": 0.5}),
    }
    rep = quality_report(runs, retest=("sft", "sft"), categories={"t1": "easy", "t2": "easy", "t3": "hard"})
    d = rep.to_dict()
    assert d["models"] == ["init", "rl", "sft"]
    assert d["hardness"]["per_model_mean"]["rl"] == pytest.approx(2.5 / 3)
    assert d["diversity"]["coverage"] == {"easy": 2, "hard": 1}
    assert d["noise"]["flip_rate"] == 0.0
    assert d["discriminating_tasks"][0]["task_id"] in {"t1", "t3"}
