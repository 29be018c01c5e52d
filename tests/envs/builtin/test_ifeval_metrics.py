"""IFEval's own metrics in an ifeval run's summary, and mode=official beside strict/loose.

Three hand-written replies (scripted, no model) whose verdicts are worked out by hand below, for
the corrected checkers and for the official one (a keyword found inside "authorized", a sentence
count that NLTK's splitter gets wrong at "approx."). Instruction-level accuracy is followed
instructions over all instructions of the run, which is not the mean of per-prompt fractions.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from verigym._cli._eval_show import print_summary
from verigym.envs.builtin.arithmetic import ArithmeticEnv
from verigym.envs.builtin.ifeval import IfevalEnv, ifeval_metrics
from verigym.eval.config import EvalConfig
from verigym.eval.run import evaluate
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Message, Task

ROWS: list[dict[str, Any]] = [
    {
        "key": 1,
        "prompt": "Describe the approval. Include the keyword authori. Do not use commas.",
        "instruction_id_list": ["keywords:existence", "punctuation:no_comma"],
        "kwargs": [{"keywords": ["authori"]}, {}],
    },
    {
        "key": 2,
        "prompt": "Describe the harbour in fewer than 3 sentences, without commas.",
        "instruction_id_list": ["length_constraints:number_sentences", "punctuation:no_comma"],
        "kwargs": [{"num_sentences": 3, "relation": "less than"}, {}],
    },
    {
        "key": 3,
        "prompt": "Answer in quotes, all lowercase, no commas.",
        "instruction_id_list": [
            "startend:quotation",
            "change_case:english_lowercase",
            "punctuation:no_comma",
        ],
        "kwargs": [{}, {}, {}],
    },
]
REPLIES = {
    "1": "The plan was authorized today.",  # "authori" only inside "authorized"
    "2": "Dr. Lee saw approx. ten boats at the dock. They left at noon.",  # 2 sentences; Punkt: 3
    "3": 'Here it is:\n"the answer is simple and clear for everyone who reads it."',  # loose: drop line 1
}
# verdicts per row, in instruction order, by hand
HAND = {
    ("strict", "strict"): [[False, True], [True, True], [False, False, True]],
    ("strict", "loose"): [[False, True], [True, True], [True, True, True]],
    ("official", "strict"): [[True, True], [False, True], [False, False, True]],
    ("official", "loose"): [[True, True], [False, True], [True, True, True]],
}


def by_hand(verdicts: list[list[bool]]) -> tuple[float, float]:
    """(prompt-level, instruction-level) accuracy as IFEval defines them."""
    flat = [v for row in verdicts for v in row]
    return sum(all(row) for row in verdicts) / len(verdicts), sum(flat) / len(flat)


def run(tmp_path: Path, mode: str) -> dict[str, Any]:
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    env = IfevalEnv(path=str(data), mode=mode)
    tasks = env.tasks()
    reply_of = {t.prompt[0].content: REPLIES[t.id] for t in tasks}

    def reply(messages: list[Message]) -> str:
        return reply_of[messages[-1].content]

    config = EvalConfig(env="ifeval", num_tasks=3, concurrency=2, env_args={"mode": mode})
    out = tmp_path / f"run-{mode}"
    result = asyncio.run(evaluate(env, ScriptedPolicy(reply), tasks, config, out=out))
    assert json.loads((out / "summary.json").read_text()) == result.summary
    return result.summary


@pytest.mark.parametrize("mode", ["strict", "official"])
def test_summary_reports_ifevals_four_metrics(tmp_path: Path, mode: str) -> None:
    summary = run(tmp_path, mode)
    metrics = summary["env_metrics"]
    assert metrics["checker"] == ("official" if mode == "official" else "corrected")
    assert (metrics["n_prompts"], metrics["n_instructions"]) == (3, 7)
    for variant in ("strict", "loose"):
        prompt_level, inst_level = by_hand(HAND[mode, variant])
        assert metrics[f"prompt_level_{variant}_acc"] == pytest.approx(prompt_level)
        assert metrics[f"inst_level_{variant}_acc"] == pytest.approx(inst_level)
    # corrected strict: instruction-level 4/7, not the mean of per-prompt fractions (1/2 + 1 + 1/3) / 3
    strict = HAND[mode, "strict"]
    assert summary["grader_means"]["strict_followed"] == pytest.approx(
        sum(sum(r) / len(r) for r in strict) / 3
    )
    assert metrics["inst_level_strict_acc"] == pytest.approx(4 / 7)
    assert summary["grader_means"]["strict_followed"] != pytest.approx(4 / 7)
    # the reward is the mode's: 0.3 x fraction followed + 0.7 x all followed, strict reading
    rewards = [0.3 * sum(r) / len(r) + 0.7 * all(r) for r in strict]
    assert summary["reward_mean"] == pytest.approx(sum(rewards) / 3)


def test_official_and_strict_disagree_where_the_official_checker_is_wrong(tmp_path: Path) -> None:
    run(tmp_path, "strict"), run(tmp_path, "official")

    def all_followed(mode: str) -> dict[str, float]:
        lines = (tmp_path / f"run-{mode}" / "results.jsonl").read_text().splitlines()
        return {r["task_id"]: r["score"]["grades"]["all_followed"]["score"] for r in map(json.loads, lines)}

    # the same prompt-level accuracy (1/3), from different prompts: official passes the substring
    # keyword (row 1) and fails the miscounted sentences (row 2); strict does the opposite
    assert all_followed("strict") == {"1": 0.0, "2": 1.0, "3": 0.0}
    assert all_followed("official") == {"1": 1.0, "2": 0.0, "3": 0.0}


def test_loose_mode_rewards_the_loose_reading(tmp_path: Path) -> None:
    summary = run(tmp_path, "loose")
    assert summary["grader_means"]["all_followed"] == pytest.approx(2 / 3)  # rows 2 and 3
    assert summary["env_metrics"]["prompt_level_loose_acc"] == pytest.approx(2 / 3)
    report = (tmp_path / "run-loose" / "report.html").read_text()
    assert "Benchmark metrics" in report and "prompt_level_loose_acc</td><td>0.6667" in report


def test_ifeval_metrics_by_hand_with_several_samples() -> None:
    tasks = [
        Task(id=str(i), prompt=(Message(role="user", content="x"),), info={"instruction_id_list": ["a"] * n})
        for i, n in enumerate([1, 2, 4])
    ]
    # two samples of task 0 (1 instruction), one of task 1 (2), one of task 2 (4): fractions
    strict = [(0, 1.0), (0, 0.0), (1, 0.5), (2, 0.75)]
    metrics = ifeval_metrics(tasks, {"strict_followed": strict, "loose_followed": strict}, "corrected")
    assert metrics["prompt_level_strict_acc"] == pytest.approx(1 / 4)
    assert metrics["inst_level_strict_acc"] == pytest.approx((1 + 0 + 1 + 3) / (1 + 1 + 2 + 4))
    assert (metrics["n_prompts"], metrics["n_instructions"]) == (4, 8)
    empty = ifeval_metrics(tasks, {}, "official")
    assert empty["prompt_level_strict_acc"] is None and empty["inst_level_loose_acc"] is None


def test_only_ifeval_runs_get_env_metrics_and_the_table_shows_them(tmp_path: Path) -> None:
    env = ArithmeticEnv()
    tasks = env.tasks(2, seed=0)
    config = EvalConfig(env="arithmetic", num_tasks=2)
    result = asyncio.run(evaluate(env, ScriptedPolicy(lambda m: "0"), tasks, config, out=tmp_path / "a"))
    assert "env_metrics" not in result.summary
    summary = run(tmp_path, "strict")
    buffer = io.StringIO()
    result.summary = summary
    print_summary(result, Console(file=buffer, width=120))
    table = buffer.getvalue()
    for name in ("prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc"):
        assert name in table
    assert "inst_level_loose_acc" in table and "0.8571" in table  # 6/7
