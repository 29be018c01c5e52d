"""``instructions_rubric``: the rubric of an instruction-following environment (``instructions``,
``ifeval``), built once.

``followed`` (weight 0.3) is the fraction of the task's instructions the final reply follows,
``all_followed`` (0.7) is 1 when it follows every one; with ``diagnostics`` two weight-0 graders
report the strict and the loose fraction beside them. The graders of one rubric share a cache of
verdicts, so a reply is checked once per mode.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from verigym.graders.format import strip_think
from verigym.graders.instructions._verify import (
    CheckerKind,
    Mode,
    _check_args,
    check_instructions,
    instructions_from_info,
)
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Task, Trajectory

__all__ = ["instructions_rubric"]


def instructions_rubric(
    mode: Mode = "strict",
    *,
    checker: CheckerKind = "corrected",
    label: str | None = None,
    diagnostics: bool = False,
) -> Rubric:
    """``followed`` + ``all_followed`` in ``mode`` with ``checker``'s verdicts (``label``: the mode
    named in the detail, default ``mode``); ``diagnostics`` adds ``strict_followed`` and
    ``loose_followed`` at weight 0."""
    _check_args(mode, checker)

    @lru_cache(maxsize=512)  # the graders read the same verdict lists
    def verdicts(text: str, todo: str, loose: bool) -> tuple[bool, ...]:
        instructions = [(i, dict(k)) for i, k in json.loads(todo)]
        return tuple(
            r.followed
            for r in check_instructions(
                text, instructions, mode="loose" if loose else "strict", checker=checker
            )
        )

    def judged(task: Task, trajectory: Trajectory, loose: bool) -> tuple[list[str], tuple[bool, ...]]:
        todo = instructions_from_info(task.info)
        if not todo:
            raise ValueError(f"task {task.id!r} lists no instructions")
        found = verdicts(strip_think(trajectory.final_text), json.dumps(todo, sort_keys=True), loose)
        return [i for i, ok in zip((i for i, _ in todo), found, strict=True) if not ok], found

    def fraction(loose: bool, named: str) -> Callable[[Task, Trajectory], Grade]:
        def grade(task: Task, trajectory: Trajectory) -> Grade:
            failed, found = judged(task, trajectory, loose)
            detail: dict[str, Any] = {"all_followed": all(found), "followed": sum(found)}
            detail |= {"total": len(found), "failed": failed, "mode": named, "checker": checker}
            return Grade(score=sum(found) / len(found), detail=json.dumps(detail))

        return grade

    def all_followed(task: Task, trajectory: Trajectory) -> Grade:
        failed, found = judged(task, trajectory, mode == "loose")
        return Grade(score=float(all(found)), detail=f"failed: {failed}")

    graders = [
        Grader(fraction(mode == "loose", label or mode), weight=0.3, name="followed"),
        Grader(all_followed, weight=0.7, name="all_followed"),
    ]
    if diagnostics:
        graders += [
            Grader(fraction(False, "strict"), weight=0.0, name="strict_followed"),
            Grader(fraction(True, "loose"), weight=0.0, name="loose_followed"),
        ]
    return Rubric(graders)
