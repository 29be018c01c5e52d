"""DeepConf online cut points, the GenSelect tournament and its fallbacks, best-of-N."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Grader
from verigym.select import Candidate, OnlineDeepConf, pick, select_online
from verigym.select.best_of_n import (
    parse_score,
    select_best_of_n_grader,
    select_best_of_n_reward_model,
)
from verigym.select.genselect import parse_judgment, split_windows
from verigym.types import Grade, Message, Task, Trajectory

CONF = [5.0, 5.0, 5.0, 4.0, 1.0, 1.0, 0.5, 4.0, 4.0]


def tops(confs: Sequence[float]) -> tuple[tuple[float, ...], ...]:
    return tuple((-c, -c) for c in confs)  # top-2 rows whose confidence is exactly c


def test_online_cuts_exactly_where_window_mean_first_drops_below_threshold() -> None:
    # window 3: means at t=3..9 are 5, 4.67, 3.33, 2.0 (equal: not below), 0.83 → cut at t = 7.
    hook = OnlineDeepConf(threshold=2.0, window=3, fraction=0)
    rows = tops(CONF)
    decisions = [hook(0, rows[:t]) for t in range(1, len(rows) + 1)]
    assert decisions == [False] * 6 + [True] * 3
    assert hook.stopped == {0: 7}
    assert hook.replay(rows) == 7
    assert OnlineDeepConf(threshold=0.5, window=3, fraction=0).replay(rows) is None
    # a new generation reusing row 0 starts from scratch
    assert hook(0, rows[:1]) is False and hook.stopped == {}


def test_online_calibrates_threshold_from_warmup() -> None:
    hook = OnlineDeepConf(window=2, eta=0.5, fraction=0)
    # lowest groups (w=2): 1.0, 3.0, 2.0, 4.0 → top 50% cut = 3.0
    warm = [tops([2, 0, 2]), tops([3, 3, 3]), tops([2, 2]), tops([4, 4, 5])]
    assert hook.calibrate(warm) == pytest.approx(3.0)
    assert hook.server_args() == {"enable_conf": True, "window_size": 2, "threshold": pytest.approx(3.0)}


def test_select_online_replays_stops_and_counts_saved_tokens() -> None:
    good = [
        Candidate(index=i, text="", answer="9", tokens=4, top_logprobs=tops([3, 3, 3, 3])) for i in range(2)
    ]
    bad = [Candidate(index=2 + i, text="", answer="7", tokens=9, top_logprobs=tops(CONF)) for i in range(3)]
    sel = select_online(good + bad, warmup=2, eta=1.0, window=3, fraction=0)
    # threshold = 3.0 (warm-up lowest groups); each bad trace is cut at t=6 (means 5, 4.67, 3.33, then 2.0 < 3)
    assert sel.detail["threshold"] == pytest.approx(3.0)
    assert sel.detail["stopped"] == 3
    assert sel.detail["tokens_used"] == 8 + 3 * 6
    assert sel.detail["tokens_saved"] == 3 * 3
    assert (sel.answer, sel.index, sel.fallbacks) == ("9", 0, 0)


def _score_of(block: str) -> int:
    return int(re.findall(r"value (\d+)", block)[0])


def best_solution_selector(messages: Sequence[Message]) -> str:
    """A stand-in judge: picks the solution with the largest value shown in the window."""
    text = messages[-1].content
    blocks = re.findall(r"Solution (\d+):\n(.*?)\n\n", text, flags=re.S)
    best = max(blocks, key=lambda b: _score_of(b[1]))
    return f"They differ.\nJudgment: {best[0]}"


@pytest.mark.parametrize(
    ("n", "window", "calls"), [(10, 8, 3), (17, 8, 4), (9, 8, 3), (5, 2, 4), (8, 8, 1), (1, 8, 0)]
)
async def test_genselect_tournament_finds_best_for_any_n(n: int, window: int, calls: int) -> None:
    values = [(i * 37) % 101 for i in range(n)]
    solutions = [f"I think. value {v}" for v in values]
    selector = ScriptedPolicy(best_solution_selector)
    for seed in range(3):
        sel = await pick(selector, "Which is largest?", solutions, window=window, seed=seed)
        assert sel.index == values.index(max(values))
        assert sel.calls == calls and sel.fallbacks == 0
        assert all(len(e["window"]) <= window for r in sel.detail["rounds"] for e in r)


def test_split_windows_balanced() -> None:
    assert [len(w) for w in split_windows(list(range(10)), 8)] == [5, 5]
    assert [len(w) for w in split_windows(list(range(17)), 8)] == [6, 6, 5]
    assert split_windows([], 8) == []


async def test_genselect_drops_incomplete_and_strips_reasoning() -> None:
    seen: list[str] = []

    def judge(messages: Sequence[Message]) -> str:
        seen.append(messages[-1].content)
        return best_solution_selector(messages)

    solutions = ["<think>secret</think>value 5", "value 99", "<think>never closed value 98", "value 7"]
    sel = await pick(ScriptedPolicy(judge), "p", solutions, finished=[True, False, True, True], seed=1)
    assert sel.index == 3 and sel.detail["dropped"] == 2
    assert "secret" not in seen[0] and "value 99" not in seen[0] and "value 98" not in seen[0]


async def test_unparseable_selector_is_a_counted_fallback_not_index_zero() -> None:
    chosen = set()
    for seed in range(20):
        sel = await pick(
            ScriptedPolicy(lambda m: "the second one looks nice"), "p", ["a 1", "b 2", "c 3"], seed=seed
        )
        assert sel.fallbacks == 1 and sel.calls == 1
        assert "Judgment" in sel.detail["rounds"][0][0]["fallback"]
        chosen.add(sel.index)
    assert chosen == {0, 1, 2}  # a seeded random pick, not always the first
    out_of_range = await pick(ScriptedPolicy(lambda m: "Judgment: 7"), "p", ["a", "b"], seed=0)
    assert out_of_range.fallbacks == 1


def test_parse_judgment() -> None:
    assert parse_judgment("Judgment: 1\n...\nJudgment: **2**", 3) == 2
    assert parse_judgment("<think>Judgment: 1</think> no verdict", 3) is None
    assert parse_judgment("Judgment: 3", 3) is None


async def test_best_of_n_reward_model_counts_parse_failures() -> None:
    def rm(messages: Sequence[Message]) -> str:
        text = messages[-1].content
        if "value 4" in text:
            return "hmm"  # unparseable: counted, not a 0
        return f"Score: {_score_of(text.split('Solution:')[1])}"

    cands = [Candidate(index=i, text=f"value {v}", answer=str(v)) for i, v in enumerate([3, 4, 8, 8])]
    sel = await select_best_of_n_reward_model(cands, ScriptedPolicy(rm), "p")
    assert (sel.index, sel.answer) == (2, "8")  # tie between 8s: earliest wins
    assert sel.detail["parse_failures"] == 1 and sel.calls == 4 and sel.fallbacks == 0
    assert parse_score("Score: 7.5") == 7.5 and parse_score("Score: **3**\n") == 3.0
    assert parse_score("141") is None and parse_score("Score: 11") is None and parse_score("great") is None
    allbad = await select_best_of_n_reward_model(cands, ScriptedPolicy(lambda m: "?"), "p", seed=3)
    assert allbad.fallbacks == 1 and allbad.detail["parse_failures"] == 4


async def test_best_of_n_with_grader_excludes_errors() -> None:
    task = Task(id="t", prompt=(Message(role="user", content="p"),))
    trajs = [Trajectory(task_id="t", sample_index=i, prompt=list(task.prompt)) for i in range(3)]

    def grade(t: Task, tr: Trajectory) -> Grade:
        if tr.sample_index == 2:
            raise RuntimeError("boom")
        return Grade(score=float(tr.sample_index))

    cands = [Candidate(index=i, text="", answer=str(i)) for i in range(3)]
    sel = await select_best_of_n_grader(task, cands, trajs, Grader(grade, name="g"))
    assert sel.index == 1 and sel.detail["grader_errors"] == 1


def test_calibrate_groups_gives_each_task_its_rows_threshold() -> None:
    hook = OnlineDeepConf(window=64, eta=1.0, fraction=0.5)
    # task 0 warm-up: lengths 4 → window min(64, 0.5·4) = 2; lowest groups 3.0; task 1: 1.0
    th = hook.calibrate_groups([[tops([3, 3, 3, 3])], [tops([1, 1, 1, 1])]], [[0, 1], [2]])
    assert hook.window == 2 and th == {0: pytest.approx(3.0), 1: pytest.approx(3.0), 2: pytest.approx(1.0)}
    dip = tops([2.0, 2.0])
    assert hook(0, dip) is True and hook(2, dip) is False  # 2.0 < 3.0 for task 0, not < 1.0 for task 1


async def test_run_online_without_hook_is_a_reported_offline_fallback() -> None:
    from verigym.select.online_run import run_online
    from verigym.types import Completion, Sampling

    def reply(messages: Sequence[Message]) -> Completion:
        return Completion(text="value 9", top_logprobs=tops([3, 3, 0.5, 3]))

    run = await run_online(
        ScriptedPolicy(reply), [Message(role="user", content="p")], n=4, sampling=Sampling(seed=0),
        answer=lambda t: t.split()[-1], warmup=2, eta=1.0, window=2, fraction=0,
    )  # fmt: skip
    assert run.mode == "offline-fallback" and run.selection.answer == "9"
    assert run.stopped == 0 and len(run.completions) == 4
