"""verigym's remote-environment client against the Open Reward Standard's reference server (``ors-sdk``),
serving the SDK's own example environment (its README's ``MathEnv``): a server nobody here wrote.

The policy is local (scripted); the reward comes from the server's ``submit`` tool. Also here: the
address forms and their one-line errors, and a server that is not there.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

os.environ.setdefault("ORS_LOG_LEVEL", "WARNING")  # the reference server logs every request at INFO

from ors import Environment, Server, Split, TextBlock, ToolOutput, tool
from pydantic import BaseModel

import verigym
from verigym._http_server import start_in_thread
from verigym.envs.registry import EnvArgError, EnvError, load_env
from verigym.eval.store import load_records
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Message, ToolCall

# ---- the ors-sdk README's example environment, as its Quick Start writes it ---------------------------


class SubmitInput(BaseModel):
    answer: str


class MathEnv(Environment):
    @classmethod
    def list_splits(cls):  # type: ignore[no-untyped-def]
        return [Split(name="test", type="test")]

    @classmethod
    def list_tasks(cls, split: str):  # type: ignore[no-untyped-def]
        return [{"question": "What is 2+2?", "answer": "4"}]

    def get_prompt(self):  # type: ignore[no-untyped-def]
        return [TextBlock(text=self.task_spec["question"])]

    @tool
    def submit(self, params: SubmitInput) -> ToolOutput:
        correct = params.answer.strip() == self.task_spec["answer"]
        return ToolOutput(
            blocks=[TextBlock(text="Correct!" if correct else "Incorrect")],
            reward=1.0 if correct else 0.0,
            finished=True,
        )


@pytest.fixture(scope="module")
def ors_url() -> Iterator[str]:
    handle = start_in_thread(Server([MathEnv]).app, name="ors-reference")
    try:
        yield handle.url
    finally:
        handle.stop()


def submitter(answer: str | None) -> ScriptedPolicy:
    """Submits ``answer`` (None: the sum the question asks for) through the ``submit`` tool, then stops."""

    def reply(messages: Sequence[Message]) -> str | tuple[str, list[ToolCall]]:
        if messages[-1].role == "tool":
            return "done"
        a, b = map(int, re.findall(r"\d+", messages[0].content))
        given = str(a + b) if answer is None else answer
        return "", [ToolCall(id="c1", name="submit", arguments=json.dumps({"answer": given}))]

    return ScriptedPolicy(reply, name=f"submit-{answer}")


def test_the_reference_servers_example_environment_is_evaluated_with_its_reward(
    ors_url: str, tmp_path: Path
) -> None:
    env = load_env(ors_url)
    assert env.protocol == "ors" and not env.info.verigym and env.info.env == "mathenv"  # type: ignore[attr-defined]
    (task,) = env.tasks(seed=0)
    assert task.id == "test-0"
    right = verigym.evaluate(env, submitter(None), out=tmp_path / "r", num_tasks=1, samples_per_task=3)
    wrong = verigym.evaluate(load_env(f"ors+{ors_url}"), submitter("5"), out=tmp_path / "w", num_tasks=1)
    assert right.summary["reward_mean"] == 1.0 and right.summary["n_errors"] == 0
    assert wrong.summary["reward_mean"] == 0.0 and wrong.summary["n_errors"] == 0
    (record, *_) = load_records(right.results_file)
    turns = record.trajectory.turns
    assert record.trajectory.prompt == [Message(role="user", content="What is 2+2?")]
    assert [t.source for t in turns] == ["model", "env"] and turns[1].messages[0].content == "Correct!"
    assert record.trajectory.state["server"] == ors_url and record.score.grades["reward"].score == 1.0


def test_a_model_that_never_submits_scores_zero_not_an_error(ors_url: str, tmp_path: Path) -> None:
    talker = ScriptedPolicy(lambda m: "four", name="talker")
    run = verigym.evaluate(ors_url, talker, out=tmp_path / "t", num_tasks=1)
    assert run.summary["reward_mean"] == 0.0 and run.summary["n_errors"] == 0
    (record,) = load_records(run.results_file)
    assert record.score.grades["reward"].detail == "the server sent no reward"


def test_bad_addresses_and_arguments_are_one_line(ors_url: str) -> None:
    with pytest.raises(EnvArgError, match="protocol 'grpc' is not one of"):
        load_env("grpc+http://127.0.0.1:1")
    with pytest.raises(EnvArgError, match="listed twice"):
        load_env(f"{ors_url},{ors_url}")
    with pytest.raises(EnvArgError, match="serves \\['mathenv'\\], not 'calc'"):
        load_env(ors_url, env="calc")
    with pytest.raises(EnvArgError, match="has no argument 'colour'"):
        load_env(ors_url, colour="red")
    with pytest.raises(EnvError, match="has no ORS GET /list_environments") as info:
        load_env(f"ors+{ors_url}/nothing-here")
    assert "\n" not in str(info.value)


def test_a_server_that_is_not_there_is_one_line() -> None:
    with pytest.raises(
        EnvError, match=r"cannot reach the env-server: http://127\.0\.0\.1:9: ConnectError"
    ) as info:
        load_env("http://127.0.0.1:9", open_timeout_s=2)
    assert "\n" not in str(info.value)
