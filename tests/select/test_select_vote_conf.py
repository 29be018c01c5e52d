"""Votes and DeepConf confidences on hand-computed synthetic logprobs."""

from __future__ import annotations

import math

import pytest

from verigym.select import Candidate, majority_vote, normalize_answer, select_deepconf, weighted_vote
from verigym.select._confidence import (
    choose_window,
    group_confidences,
    keep_top,
    token_confidences,
    trace_score,
)
from verigym.select.majority import select_majority


def tops(confs: list[float]) -> tuple[tuple[float, ...], ...]:
    """Top-k rows whose token confidence is exactly ``c`` (one logprob of −c)."""
    return tuple((-c,) for c in confs)


def test_token_confidence_is_minus_mean_of_top_k() -> None:
    rows = [[-0.1, -2.3, -4.0], [-0.5, -0.5, -0.5]]
    assert token_confidences(rows, k=2) == pytest.approx([1.2, 0.5])
    assert token_confidences(rows, k=3) == pytest.approx([6.4 / 3, 0.5])
    assert token_confidences(rows, k=20) == pytest.approx([6.4 / 3, 0.5])  # fewer than k given
    with pytest.raises(ValueError, match="no top logprobs"):
        token_confidences([[-1.0], []])


def test_group_confidences_and_trace_scores() -> None:
    c = [3.0, 3.0, 1.0, 1.0, 3.0]
    assert group_confidences(c, 2) == pytest.approx([3.0, 2.0, 1.0, 2.0])
    assert group_confidences(c, 9) == pytest.approx([11 / 5])  # shorter than the window: one group
    assert trace_score(c, 2, "lowest") == pytest.approx(1.0)
    assert trace_score(c, 2, "bottom10") == pytest.approx(1.0)  # ceil(10% of 4 groups) = 1 group
    assert trace_score(c * 4, 2, "bottom10") == pytest.approx(1.0)
    assert trace_score([float(v) for v in range(11, 0, -1)], 1, "bottom10") == pytest.approx(1.5)
    assert trace_score(c, 2, "tail") == pytest.approx(2.0)
    assert trace_score(c, 2, "mean") == pytest.approx(2.2)
    assert trace_score([], 2) is None


def test_window_scales_with_median_length() -> None:
    assert choose_window([100, 40, 60], window=2048, fraction=0.25) == 15
    assert choose_window([40_000], window=2048) == 2048
    assert choose_window([2], window=2048) == 1
    assert choose_window([100], window=16, fraction=0) == 16


def test_keep_top_eta_keeps_ties_at_the_cut() -> None:
    assert keep_top([1.0, 5.0, 3.0, 4.0, None], 0.5) == [False, True, False, True, False]
    assert keep_top([2.0, 2.0, 1.0], 0.1) == [True, True, False]
    assert keep_top([None, None], 0.9) == [False, False]


def test_majority_tie_goes_to_first_seen_answer() -> None:
    vote = majority_vote(["b", None, "a", "a", "b"])
    assert (vote.answer, vote.position, vote.weight, vote.total) == ("b", 0, 2.0, 4.0)
    assert set(vote.tied) == {"a", "b"}
    assert majority_vote(["a", "b", "b"]).answer == "b"
    empty = majority_vote([None, None])
    assert empty.answer is None and empty.position is None


def test_weighted_vote_sums_weights_and_merges_equivalents() -> None:
    vote = weighted_vote(["1", "2", "2", "1"], [0.5, 0.3, 0.3, 0.2])
    assert vote.answer == "1" and vote.weight == pytest.approx(0.7)  # 0.7 > 0.6
    assert weighted_vote(["1", "2", "2", "1"], [0.1, 0.3, 0.3, 0.2]).answer == "2"  # 0.6 > 0.3
    merged = weighted_vote(["1/2", "0.5", "3", "3"], None, equivalent=lambda a, b: eval(a) == eval(b))
    assert merged.tally == {"1/2": 2.0, "3": 2.0} and merged.answer == "1/2"
    with pytest.raises(ValueError, match="finite"):
        weighted_vote(["1"], [math.nan])


def test_normalize_answer() -> None:
    assert normalize_answer(" 042. ") == "42"
    assert normalize_answer("$+42.0$") == "42"
    assert normalize_answer("1,234") == "1234"
    assert normalize_answer("-0.50") == "-0.5"
    assert normalize_answer("x + 1") == "x+1"
    assert normalize_answer("  ") is None


def test_deepconf_offline_filters_low_confidence_majority() -> None:
    # three unconfident traces say 7, two confident ones say 9.
    lows = [
        Candidate(index=i, text="", answer="7", tokens=4, top_logprobs=tops([2, 2, 0.5, 2])) for i in range(3)
    ]
    highs = [
        Candidate(index=3 + i, text="", answer="9", tokens=4, top_logprobs=tops([3, 3, 3, 3]))
        for i in range(2)
    ]
    cands = lows + highs
    assert select_majority(cands).answer == "7"
    sel = select_deepconf(cands, eta=0.4, window=2, fraction=0)
    # window 2: lowest groups are 1.25 (answer 7) and 3.0 (answer 9); top 40% of 5 = 2 traces.
    assert (sel.answer, sel.index) == ("9", 3)
    assert sel.detail["kept"] == 2 and sel.detail["tally"] == {"9": pytest.approx(6.0)}
    # η = 0.9 keeps everything but the weights: 3 × 1.25 = 3.75 < 2 × 3.0 = 6.0.
    assert select_deepconf(cands, eta=0.9, window=2, fraction=0).answer == "9"
    assert select_deepconf(cands, eta=1.0, window=2, fraction=0, score="mean").detail["tally"][
        "7"
    ] == pytest.approx(3 * 1.625)


def test_deepconf_without_logprobs_is_an_error_not_a_guess() -> None:
    with pytest.raises(ValueError, match="top-k logprobs"):
        select_deepconf([Candidate(index=0, text="x", answer="1")])


def test_answer_key_uses_the_environments_parser() -> None:
    from verigym.envs.registry import load_env
    from verigym.select import answer_key, register_answer_parser

    env = load_env("arithmetic")
    assert answer_key(env, "12+34=46") == "46"  # the arithmetic grader reads the final integer
    assert answer_key(env, "no number") is None
    assert answer_key(None, "so \\boxed{1/2}") == "1/2"  # math extraction when no env parser

    class WithParser:
        name = "custom"

        def parse_answer(self, text: str) -> str:
            return text.upper()

    assert answer_key(WithParser(), "abc") == "ABC"

    class Named:
        name = "named-env"

    register_answer_parser("named-env", lambda text: text[::-1])
    assert answer_key(Named(), "abc") == "cba"
    register_answer_parser("named-env", lambda text: 1 / 0)
    assert answer_key(Named(), "abc") is None  # a crashing parser means "no answer", not a guess
