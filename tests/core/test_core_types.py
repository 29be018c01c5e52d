"""JSON round-trip of every type in ``verigym.types`` and the behaviour of their helpers."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import verigym.types as T
from verigym.types import (
    Completion,
    ErrorInfo,
    Grade,
    Message,
    Record,
    Sampling,
    Score,
    Task,
    ToolCall,
    Trajectory,
    Turn,
    Usage,
)

CALL = ToolCall(id="c1", name="lookup", arguments='{"q": "x"}')
COMPLETION = Completion(
    text="<think>hm</think>46",
    tool_calls=(CALL,),
    finish_reason="tool_calls",
    prompt_token_ids=(1, 2, 3),
    completion_token_ids=(4, 5),
    logprobs=(-0.1, -float("inf")),
    top_logprobs=((-0.1, -2.0), (-float("inf"), -float("inf"))),
    token_ids_exact=True,
    usage=Usage(prompt_tokens=3, completion_tokens=2),
    model="m",
    policy_version=7,
)
TASK = Task(
    id="t1",
    prompt=(Message(role="system", content="be brief"), Message(role="user", content="12+34=")),
    answer="46",
    info={"db": {"rows": [1, 2]}, "note": "hidden"},
)
TRAJ = Trajectory(
    task_id="t1",
    sample_index=2,
    prompt=list(TASK.prompt),
    turns=[
        Turn(source="model", messages=[COMPLETION.as_message()], completion=COMPLETION),
        Turn(source="env", messages=[Message(role="tool", content="ok", tool_call_id="c1", name="lookup")]),
        Turn(
            source="model",
            messages=[Message(role="assistant", content="46")],
            completion=Completion(text="46"),
        ),
    ],
    stop_reason="done",
    error=ErrorInfo(kind="policy", message="x"),
    started_at=1.5,
    wall_s=0.25,
    state={"calls": 1, "items": ["a"]},
)
SCORE = Score(
    grades={"correct": Grade(score=1.0, detail="ok"), "judge": Grade.failed("timed out")},
    reward=None,
    error="judge: timed out",
    penalty=0.5,
)
EXAMPLES: dict[str, Any] = {
    "ToolCall": CALL,
    "Message": Message(role="tool", content="r", tool_call_id="c1", name="lookup"),
    "Task": TASK,
    "Sampling": Sampling(temperature=0.7, top_k=5, stop=("\n",), seed=3, logprobs=True, top_logprobs=2),
    "Usage": Usage(prompt_tokens=1, completion_tokens=2),
    "Completion": COMPLETION,
    "ErrorInfo": ErrorInfo(kind="timeout", message="slow"),
    "Turn": TRAJ.turns[0],
    "Trajectory": TRAJ,
    "Grade": Grade.failed("boom"),
    "Score": SCORE,
    "Record": Record(
        env="arithmetic",
        model="m",
        task_id="t1",
        sample_index=2,
        sampling=Sampling(),
        trajectory=TRAJ,
        score=SCORE,
        usage=TRAJ.usage,
        wall_s=0.3,
        error=ErrorInfo(kind="grader", message="judge timed out"),
    ),
}


def test_every_model_type_has_an_example() -> None:
    models = {
        n for n in T.__all__ if isinstance(getattr(T, n), type) and issubclass(getattr(T, n), BaseModel)
    }
    assert models == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_json_round_trip(name: str) -> None:
    value = EXAMPLES[name]
    text = value.model_dump_json()
    back = type(value).model_validate_json(text)
    assert back.model_dump_json() == text
    assert "NaN" not in text and "Infinity" not in text.replace('"-Infinity"', "")


def test_errored_grade_keeps_nan_and_error_through_json() -> None:
    back = Grade.model_validate_json(Grade.failed("boom").model_dump_json())
    assert math.isnan(back.score) and back.error == "boom" and not back.ok


def test_minus_infinity_logprob_survives_json() -> None:
    back = Completion.model_validate_json(COMPLETION.model_dump_json())
    assert back.logprobs is not None and back.logprobs[1] == -math.inf
    assert back == COMPLETION


def test_value_types_are_frozen_and_strict() -> None:
    with pytest.raises(ValidationError):
        TASK.id = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Message(role="user", content="x", surprise=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        Message(role="robot", content="x")  # type: ignore[arg-type]


def test_trajectory_helpers() -> None:
    assert [m.role for m in TRAJ.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert TRAJ.final_text == "46"
    assert len(TRAJ.completions) == 2
    assert TRAJ.usage == Usage(prompt_tokens=3, completion_tokens=2)
    assert Trajectory(task_id="x", prompt=[]).final_text == ""


def test_tool_call_arguments() -> None:
    assert CALL.parsed_arguments() == {"q": "x"}
    with pytest.raises(ValueError, match="not valid JSON"):
        ToolCall(id="1", name="f", arguments="{bad").parsed_arguments()
    with pytest.raises(ValueError, match="JSON object"):
        ToolCall(id="1", name="f", arguments="[1]").parsed_arguments()


def test_message_to_openai() -> None:
    out = COMPLETION.as_message().to_openai()
    assert out["role"] == "assistant"
    assert out["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"q": "x"}'}
    assert Message(role="tool", content="r", tool_call_id="c1").to_openai()["tool_call_id"] == "c1"
