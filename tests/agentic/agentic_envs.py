"""Environments for the penalty and --mcp CLI tests, loaded as ``agentic_envs.py:NAME``."""

from __future__ import annotations

from verigym.envs.base import SingleTurnEnv
from verigym.envs.tool import ToolEnv
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Message, Task, Trajectory


def _says_three(task: Task, trajectory: Trajectory) -> Grade:
    return Grade(score=float("3" in trajectory.final_text))


def _is_seven(task: Task, trajectory: Trajectory) -> Grade:
    return Grade(score=float(trajectory.final_text.strip() == "7"))


class OnePlusTwo(SingleTurnEnv):
    """What is 1 + 2? (any reply containing 3 scores 1)."""

    name = "one_plus_two"

    def __init__(self) -> None:
        super().__init__(rubric=Rubric([Grader(_says_three, name="says_three")]))

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        count = 4 if n is None else n
        return [
            Task(id=f"t{i}", prompt=(Message(role="user", content="What is 1 + 2?"),)) for i in range(count)
        ]


class NeedsAdd(ToolEnv):
    """Add 2 and 5 with a tool this environment does not have (MCP supplies it); the answer must be 7."""

    name = "needs_add"

    def __init__(self) -> None:
        super().__init__([], rubric=Rubric([Grader(_is_seven, name="seven")]), max_turns=4)

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        count = 2 if n is None else n
        return [
            Task(id=f"t{i}", prompt=(Message(role="user", content="Add 2 and 5."),)) for i in range(count)
        ]
