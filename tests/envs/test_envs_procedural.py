"""``envs.procedural``: a ``ProceduralEnv`` gets seeded, split ``tasks()`` from its generator, and a
``task_oracle`` is handed the episode's task by the rollout (no lookup by prompt)."""

from __future__ import annotations

import asyncio
import random

from verigym.envs.base import SingleTurnEnv, episode_task
from verigym.envs.datasets import procedural_tasks
from verigym.envs.procedural import HandsOutTasks, ProceduralEnv, task_oracle
from verigym.policies.base import Policy
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Message, Sampling, Task, Trajectory


def _exact(task: Task, trajectory: Trajectory) -> Grade:
    return Grade(score=float(trajectory.final_text.strip() == task.answer))


class SumEnv(ProceduralEnv, SingleTurnEnv):
    task_name = "sum"

    def __init__(self) -> None:
        super().__init__(rubric=Rubric([Grader(_exact, name="exact")]))
        self.size = 5

    def generate(self, rng: random.Random) -> Task:
        a, b = rng.randrange(100), rng.randrange(100)
        return Task(id="", prompt=(Message(role="user", content=f"{a}+{b}"),), answer=str(a + b))

    def oracle_policy(self) -> Policy:
        return self.task_oracle(lambda task, _: str(task.answer), name="sum-oracle")


def test_tasks_are_procedural_tasks_of_the_generator() -> None:
    env = SumEnv()
    assert env.tasks(seed=2, split="train") == procedural_tasks(
        env.generate, 5, seed=2, split="train", name="sum"
    )
    assert len(env.tasks(3)) == 3


def test_the_oracle_is_handed_its_task_even_one_it_never_saw() -> None:
    env = SumEnv()
    handmade = Task(id="mine", prompt=(Message(role="user", content="2+2"),), answer="4")
    oracle = env.oracle_policy()
    trajectory = asyncio.run(env.rollout(handmade, oracle, Sampling()))
    assert trajectory.final_text == "4" and episode_task() is None  # reset after the episode
    assert asyncio.run(oracle.complete([Message(role="user", content="2+2")], sampling=Sampling())).text == ""
    bare = task_oracle(lambda task, _: str(task.answer), name="bare")
    assert asyncio.run(env.rollout(handmade, bare, Sampling())).final_text == "4"


def test_outside_an_episode_the_oracle_finds_the_tasks_the_env_handed_out() -> None:
    env = SumEnv()
    (task,) = env.tasks(1)
    reply = asyncio.run(env.oracle_policy().complete(list(task.prompt), sampling=Sampling()))
    assert reply.text == task.answer  # e.g. an oracle behind a served endpoint


class FileEnv(HandsOutTasks, SingleTurnEnv):
    """A dataset-backed env: its tasks come from a list, not a generator."""

    def __init__(self, rows: list[Task]) -> None:
        super().__init__(rubric=Rubric([Grader(_exact, name="exact")]))
        self.rows = rows

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return self.hand_out(self.rows[:n])

    def oracle_policy(self) -> Policy:
        return self.task_oracle(lambda task, _: str(task.answer), name="file-oracle")


def test_a_dataset_env_hands_out_its_tasks_to_a_served_oracle() -> None:
    rows = [
        Task(id=f"r{i}", prompt=(Message(role="user", content=f"{i}+1"),), answer=str(i + 1))
        for i in range(3)
    ]
    env = FileEnv(rows)
    oracle = env.oracle_policy()
    assert (
        asyncio.run(oracle.complete(list(rows[2].prompt), sampling=Sampling())).text == ""
    )  # not handed out
    assert env.tasks() == rows
    assert asyncio.run(oracle.complete(list(rows[2].prompt), sampling=Sampling())).text == "3"


class LastDigitEnv(SumEnv):
    task_name = "last-digit"

    def split_key(self, task: Task) -> str:
        return str(task.answer)[-1]  # ten keys: a split's tasks share theirs with no task of the other


def test_split_key_decides_the_split() -> None:
    env = LastDigitEnv()
    test = {str(t.answer)[-1] for t in env.tasks(30, split="test")}
    train = {str(t.answer)[-1] for t in env.tasks(30, split="train")}
    assert test and train and not test & train and len(test) < len(train)
