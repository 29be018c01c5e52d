"""Synthesis keeps only variants that re-verify, and records provenance."""

from __future__ import annotations

import re
from collections.abc import Sequence

from verigym.data.synthesis import invert_numeric, rewrite, svs_variants, synthesize_tool_tasks
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Message, Task


def _task(text: str, answer: str, tid: str = "t0") -> Task:
    return Task(id=tid, prompt=(Message(role="user", content=text),), answer=answer)


def _sum_of_numbers(task: Task) -> int:
    return sum(int(x) for x in re.findall(r"-?\d+", task.prompt[-1].content))


async def _solver(task: Task, n: int) -> tuple[int, int]:
    """A stand-in solver: right iff the numbers in the prompt still sum to the answer."""
    ok = task.answer is not None and _sum_of_numbers(task) == int(task.answer)
    return (n if ok else 0), n


async def test_rewrite_drops_variants_that_change_the_answer() -> None:
    outputs = iter(["Add 3 and 4.", "Add 3 and 5."])  # the second rewrite broke the problem

    def write(_: Sequence[Message]) -> str:
        return next(outputs)

    task = _task("What is 3 plus 4?", "7")
    kept = await rewrite(task, ScriptedPolicy(write, name="writer"), _solver, n_variants=2)
    assert [t.prompt[-1].content for t in kept] == ["Add 3 and 4."]
    assert kept[0].answer == "7"
    assert kept[0].info["provenance"] == {"method": "paraphrase", "parent": "t0", "generator": "writer"}


async def test_svs_band_and_source_band() -> None:
    task = _task("What is 3 plus 4?", "7")
    writer = ScriptedPolicy(lambda _: "Sum 2 and 5.")

    async def half_right(t: Task, n: int) -> tuple[int, int]:
        return n // 2, n  # 0.5 solve rate: inside [0.125, 0.625]

    async def always_right(t: Task, n: int) -> tuple[int, int]:
        return n, n  # too easy: outside the band

    kept = await svs_variants(task, ["3+4=7"], 0.25, writer, half_right)
    assert len(kept) == 1 and kept[0].info["solve_rate"] == 0.5 and kept[0].answer == "7"
    assert await svs_variants(task, ["3+4=7"], 0.25, writer, always_right) == []
    assert await svs_variants(task, ["3+4=7"], 0.9, writer, half_right) == []  # source too easy


def test_invert_numeric_hides_a_number_and_verifies() -> None:
    task = _task("12+34=", "46")
    inv = invert_numeric(task, seed=0)
    assert inv is not None
    assert inv.answer in {"12", "34"}
    assert "□" in inv.prompt[-1].content and "46" in inv.prompt[-1].content
    assert inv.info["provenance"]["parent"] == "t0"
    assert invert_numeric(task, check=lambda t: False) is None
    assert invert_numeric(_task("name a colour", "red")) is None


async def test_tool_synthesis_keeps_only_oracle_solved() -> None:
    requests = iter(["refund order 1", "fly me to the moon", "refund order 2"])
    writer = ScriptedPolicy(lambda _: next(requests))
    schemas = [{"type": "function", "function": {"name": "refund", "description": "refund an order"}}]

    def make(request: str, i: int) -> Task | None:
        m = re.search(r"order (\d+)", request)
        return _task(request, m.group(1), f"s{i}") if m else None

    async def oracle(t: Task) -> bool:
        return True

    kept, attempts = await synthesize_tool_tasks(
        [_task("refund order 9", "9")], schemas, writer, make, oracle, n=2
    )
    assert [t.answer for t in kept] == ["1", "2"] and attempts == 3
    assert all(t.info["provenance"]["method"] == "tool_synthesis" for t in kept)
