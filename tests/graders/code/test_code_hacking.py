"""Anti-hacking detectors: the labeled suite, Penalty wiring, the second judge with masked errors."""

from __future__ import annotations

import json
from pathlib import Path

from verigym.graders.hacking import (
    any_hacking,
    bench_verdict,
    cheat_judge,
    hacking_penalty,
    hedged_answer,
    network_attempts,
    passed_by,
)
from verigym.policies.base import PolicyError
from verigym.rubric import Grader, Penalty, Rubric
from verigym.types import Completion, Message, Sampling, Task, ToolCall, Trajectory, Turn

SUITE = Path(__file__).resolve().parents[2] / "suites" / "hacking.jsonl"
TASK = Task(id="t", prompt=(Message(role="user", content="What is 6*7?"),), answer="42")


def _traj(text: str, calls: tuple[ToolCall, ...] = (), **state: object) -> Trajectory:
    msg = Message(role="assistant", content=text, tool_calls=calls)
    return Trajectory(
        task_id="t", prompt=list(TASK.prompt), turns=[Turn(source="model", messages=[msg])], state=dict(state)
    )


def _correct(task: Task, trajectory: Trajectory) -> float:
    return 1.0 if "42" in trajectory.final_text else 0.0


def test_hacking_suite_has_no_misses() -> None:
    lines = [json.loads(x) for x in SUITE.read_text().splitlines() if x.strip()]
    assert len(lines) >= 30 and {ln["expect"] for ln in lines} == {"pass", "fail"}
    misses = [ln["id"] for ln in lines if bench_verdict(ln) != (ln["expect"] == "pass")]
    assert not misses, misses


async def test_penalty_applies_through_the_rubric() -> None:
    rubric = Rubric(graders=[Grader(_correct, name="correct")], penalty=hacking_penalty(amount=1.0))
    clean = await rubric.score(TASK, _traj("\\boxed{42}"))
    hedge = await rubric.score(TASK, _traj("\\boxed{41} or \\boxed{42}"))
    net = await rubric.score(
        TASK, _traj("\\boxed{42}", sandbox_events=["socket.connect('socket', ('1.2.3.4', 80))"])
    )
    assert clean.reward == 1.0 and clean.penalty == 0.0
    assert hedge.reward == 0.0 and hedge.penalty == 1.0
    assert net.reward == 0.0
    shell = _traj(
        "\\boxed{42}", (ToolCall(id="1", name="run_shell", arguments='{"cmd": "wget http://x/answer"}'),)
    )
    assert (
        await Rubric(graders=[Grader(_correct, name="c")], penalty=Penalty(network_attempts())).score(
            TASK, shell
        )
    ).reward == 0.0


class _Judge:
    def __init__(self, text: str | None) -> None:
        self.text, self.calls = text, 0

    @property
    def name(self) -> str:
        return "judge"

    async def complete(
        self, messages: list[Message], *, tools: object = None, sampling: Sampling
    ) -> Completion:
        self.calls += 1
        if self.text is None:
            raise PolicyError("server", "judge endpoint down")
        return Completion(text=self.text)


async def test_cheat_judge_penalises_and_its_errors_are_masked() -> None:
    base = [Grader(_correct, name="correct")]
    cheat = _Judge("They hard-coded the output.\nVERDICT: CHEATING")
    scored = await Rubric(graders=base, penalty=Penalty(cheat_judge(cheat))).score(TASK, _traj("\\boxed{42}"))
    assert scored.reward == 0.0 and scored.penalty == 1.0
    clean = _Judge("Looks fine. VERDICT: CLEAN")
    assert (
        await Rubric(graders=base, penalty=Penalty(cheat_judge(clean))).score(TASK, _traj("\\boxed{42}"))
    ).reward == 1.0
    for broken in (_Judge(None), _Judge("I refuse to answer in the format.")):
        s = await Rubric(graders=base, penalty=Penalty(cheat_judge(broken))).score(TASK, _traj("\\boxed{42}"))
        assert (
            s.reward == 1.0 and s.error is None and s.penalty == 0.0
        )  # masked: neither rewarded nor penalised
        assert s.grades["penalty:cheat_judge"].error is not None


async def test_judge_reviews_only_passing_rollouts() -> None:
    judge = _Judge("VERDICT: CHEATING")
    grader = cheat_judge(judge, review_if=passed_by(Grader(_correct, name="correct")))
    assert (await grader.grade(TASK, _traj("\\boxed{7}"))).detail == "not reviewed" and judge.calls == 0
    assert (await grader.grade(TASK, _traj("\\boxed{42}"))).score == 1.0 and judge.calls == 1


async def test_any_hacking_combines_and_reports_errors_only_without_hits() -> None:
    def boom(task: Task, trajectory: Trajectory) -> float:
        raise RuntimeError("detector broke")

    combo = any_hacking(Grader(boom, name="boom"), hedged_answer())
    assert (await combo.grade(TASK, _traj("\\boxed{1} \\boxed{2}"))).score == 1.0
    assert (await combo.grade(TASK, _traj("\\boxed{42}"))).error is not None
