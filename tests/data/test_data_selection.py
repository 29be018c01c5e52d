"""Difficulty profiles, variance ranking and rejection sampling on hand-built records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from verigym.data.difficulty import Profile, rank_by_variance
from verigym.data.rejection import jaccard, select_verified, write_sft


def _rec(task: str, idx: int, reward: float | None, text: str, tokens: int) -> dict[str, Any]:
    return {
        "task_id": task,
        "sample_index": idx,
        "env": "e",
        "model": "m",
        "score": {"reward": reward},
        "usage": {"completion_tokens": tokens},
        "error": None if reward is not None else {"kind": "policy", "message": "500"},
        "trajectory": {
            "prompt": [{"role": "user", "content": f"q {task}"}],
            "turns": [
                {"source": "model", "messages": [{"role": "assistant", "content": text}]},
                {"source": "env", "messages": [{"role": "tool", "content": "obs"}]},
            ],
        },
    }


def test_profile_band_and_roundtrip(tmp_path: Path) -> None:
    recs = [_rec("easy", i, 1.0, "a", 1) for i in range(4)]
    recs += [_rec("mid", i, float(i < 2), "a", 1) for i in range(4)]
    recs += [_rec("hard", i, 0.0, "a", 1) for i in range(4)] + [_rec("hard", 9, None, "", 1)]
    prof = Profile.from_records(recs)
    assert prof.pass_rate("mid") == 0.5 and prof.pass_rate("easy") == 1.0
    assert prof.tasks["hard"].samples == 4  # the errored sample is not a failure
    assert prof.in_band() == ["mid"]
    assert prof.in_band(0.0, 0.5, inclusive=True) == ["hard", "mid"]
    prof.save(tmp_path / "p.jsonl")
    again = Profile.load(tmp_path / "p.jsonl")
    assert again.pass_rate("mid") == 0.5 and again.in_band() == ["mid"]
    (tmp_path / "bad.jsonl").write_text('{"task_id": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1"):
        Profile.load(tmp_path / "bad.jsonl")


def test_online_update_with_decay() -> None:
    prof = Profile(decay=0.5)
    prof.observe("t", [False, False])
    prof.observe("t", [True, True])
    # passes: 0*0.5+2 = 2; samples: round(2*0.5)+2 = 3
    assert prof.pass_rate("t") == pytest.approx(2 / 3)


def test_variance_ranking_matches_hand_computation() -> None:
    history = {"a": [0.0, 1.0, 0.0, 1.0], "b": [0.5, 0.5, 0.5], "c": [0.0, 0.0, 1.0], "d": [1.0]}
    # pvariance: a = 0.25, b = 0, c = 2/9 ≈ 0.222; d has one point and is left out
    ranked = rank_by_variance(history)
    assert [t for t, _ in ranked] == ["a", "c", "b"]
    assert ranked[0][1] == pytest.approx(0.25) and ranked[1][1] == pytest.approx(2 / 9)
    assert rank_by_variance(history, top=1) == [("a", pytest.approx(0.25))]


def test_rejection_keeps_only_verified_and_counts_errors(tmp_path: Path) -> None:
    recs = [
        _rec("t1", 0, 1.0, "the answer is 4 because two plus two", 9),
        _rec("t1", 1, 0.0, "5", 1),
        _rec("t1", 2, 1.0, "4", 1),
        _rec("t1", 3, 1.0, "the answer is 4 because two plus two", 9),
        _rec("t2", 0, 0.0, "no", 1),
        _rec("t2", 1, None, "", 0),
    ]
    kept, stats = select_verified(recs)
    assert [r["sample_index"] for r in kept] == [0, 2, 3]
    assert all(r["score"]["reward"] == 1.0 for r in kept)
    d = stats.to_dict()
    assert d["errors"] == 1 and d["samples"] == 5 and d["accepted"] == 3
    assert d["per_task_yield"] == {"t1": 0.75, "t2": 0.0}
    shortest, _ = select_verified(recs, keep="shortest")
    assert [r["sample_index"] for r in shortest] == [2]
    diverse, _ = select_verified(recs, keep="diverse")
    assert [r["sample_index"] for r in diverse] == [2, 0]  # the duplicate of 0 is dropped
    n = write_sft(kept, tmp_path / "sft.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert n == 3 and lines[0]["loss_mask"] == [0, 1, 0]
    assert [m["role"] for m in lines[0]["messages"]] == ["user", "assistant", "tool"]


def test_jaccard_bounds() -> None:
    assert jaccard("a b c d", "a b c d") == 1.0
    assert jaccard("a b c", "x y z") == 0.0
