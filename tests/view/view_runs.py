"""Run folders for the viewer's tests (``conftest.py`` makes them once a session): eval records as
``verigym eval`` writes them, and a training run trained here (three RL steps of the tiny model, so
``rollouts_sample.jsonl`` is the trainer's own).

The eval records are written as ``verigym eval`` writes them (``Record.model_dump_json``), with token
ids from the tiny model's own tokenizer so the sample page decodes and shades them; one reply holds
``<script>`` and an ``<img onerror>``, which the page must show as text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from verigym.envs.builtin.arithmetic import ArithmeticEnv
from verigym.envs.registry import register_env
from verigym.rubric import Grader, Rubric
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

SCRIPT_REPLY = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">the answer is 7'
TASKS = [f"calc-{i}" for i in range(12)]


def _completion(
    text: str, tok: Any, *, calls: tuple[ToolCall, ...] = (), version: int | None = None
) -> Completion:
    ids = tuple(tok.encode(text).ids)
    lps = tuple(-0.02 - (i * 7 % 5) * 0.45 for i in range(len(ids)))
    return Completion(
        text=text,
        tool_calls=calls,
        finish_reason="tool_calls" if calls else "stop",
        prompt_token_ids=(1, 2, 3),
        completion_token_ids=ids or None,  # a call written as structured output: no text tokens
        logprobs=lps or None,
        token_ids_exact=bool(ids),
        usage=Usage(prompt_tokens=3, completion_tokens=len(ids)),
        model="tiny",
        policy_version=version,
    )


def record(
    task: str, k: int, passed: bool | None, tok: Any, *, reply: str | None = None, agent: bool = False
) -> Record:
    """One calc-like sample: a system prompt, the question, a calculator call and its result, the answer.
    ``passed`` None: an errored sample (no reward)."""
    n = int(task.split("-")[1])
    question = f"What is {n} * 7? Use the calculator."
    value = str(n * 7 if passed else n * 7 + 1)
    answer = reply if reply is not None else f"{n} * 7 = {value}"
    got = reply[:40] if reply is not None else value
    call = ToolCall(id=f"call-{k}", name="calc", arguments=json.dumps({"expr": f"{n}*7"}))
    first = _completion("", tok, calls=(call,))
    last = _completion(answer, tok)
    turns = [
        Turn(source="model", messages=[first.as_message()], completion=first),
        Turn(
            source="env",
            messages=[Message(role="tool", content=str(n * 7), tool_call_id=call.id, name="calc")],
        ),
        Turn(source="model", messages=[last.as_message()], completion=last),
    ]
    state: dict[str, Any] = {}
    if agent:
        side = _completion("A short summary of the work so far.", tok)
        turns.insert(0, Turn(source="branch", messages=[side.as_message()], completion=side))
        state = {
            "gateway": {"calls": 3, "merged": 1, "branches": 1, "prefix_breaks": 0, "replayed": 0},
            "calls": [
                {"call": 0, "kind": "root", "parent": None, "dialect": "chat", "wall_s": 0.01},
                {"call": 1, "kind": "auxiliary", "parent": 0, "dialect": "chat", "wall_s": 0.01},
                {"call": 2, "kind": "continue", "parent": 0, "dialect": "chat", "wall_s": 0.01},
            ],
        }
    traj = Trajectory(
        task_id=task,
        sample_index=k,
        prompt=[
            Message(role="system", content="You are a calculator agent."),
            Message(role="user", content=question),
        ],
        turns=turns,
        stop_reason="error" if passed is None else "done",
        wall_s=0.1 + n / 100,
        state=state,
    )
    if passed is None:
        score, error = (
            Score(error="policy: connection reset"),
            ErrorInfo(kind="policy", message="connection reset"),
        )
    else:
        grades = {
            "correct": Grade(score=float(passed), detail=f"expected {n * 7}, got {got}"),
            "tool_call_ok": Grade(score=1.0, detail="calc called once"),
        }
        score, error = Score(grades=grades, reward=float(passed)), None
    return Record(
        env="calc",
        model="tiny",
        task_id=task,
        sample_index=k,
        sampling=Sampling(temperature=1.0, max_tokens=32, seed=n * 10 + k),
        trajectory=traj,
        score=score,
        usage=Usage(prompt_tokens=6, completion_tokens=len(last.completion_token_ids or ())),
        wall_s=0.1 + n / 100,
        error=error,
    )


def write_eval(folder: Path, records: list[Record], model: Path, *, summary: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "results.jsonl").open("w") as fh:
        for r in records:
            fh.write(r.model_dump_json() + "\n")
    config = {
        "config": {"env": "calc", "env_args": {}, "model": str(model), "success_threshold": 1.0},
        "written_at": "2026-11-28T20:00:00Z",
    }
    (folder / "config.json").write_text(json.dumps(config))
    if summary:
        scored = [r.score.reward for r in records if r.score.reward is not None]
        (folder / "summary.json").write_text(
            json.dumps(
                {
                    "n_samples": len(records),
                    "n_errors": sum(r.error is not None for r in records),
                    "reward_mean": sum(scored) / len(scored) if scored else None,
                    "pass_at_k": {"1": sum(scored) / len(scored) if scored else None},
                    "total_tokens": sum(r.usage.total_tokens for r in records),
                    "wall_s": 1.5,
                }
            )
        )
    return folder


def _digit_share(task: Task, trajectory: Trajectory) -> float:
    text = trajectory.final_text
    return sum(c.isdigit() for c in text) / len(text) if text else 0.0


def _digits_env() -> ArithmeticEnv:
    """Arithmetic prompts rewarded by the share of digits in the reply: a dense signal even for the
    untrained tiny model, so every group has advantages to show."""
    env = ArithmeticEnv(level=1, size=64)
    env.rubric = Rubric([Grader(_digit_share, name="digits")])
    return env


register_env("digits-view-test", _digits_env)


def train_run(folder: Path) -> None:
    """Three RL steps of the tiny model: the trainer writes metrics.jsonl and rollouts_sample.jsonl
    itself; stages.json and summary.json stand for the SFT stage and the pipeline's summary."""
    import torch

    from verigym.train._model import load_model
    from verigym.train.config import build_config
    from verigym.train.rl import RLTrainer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = build_config(
        {
            "seed": 0,
            "out_dir": str(folder),
            "envs": [{"name": "digits-view-test"}],
            "sampling": {"max_tokens": 4},
            "rl": {"preset": "dr_grpo", "steps": 3, "groups_per_step": 3, "group_size": 4, "eval_every": 2},
            "eval": {"tasks": 8},
            "logging": {"rollout_groups": 2},
        }
    )
    model, tok = load_model(cfg.model)
    history = RLTrainer(cfg, model=model, tokenizer=tok).train()
    torch.set_num_threads(threads)
    (folder / "stages.json").write_text(json.dumps({"pass_at_1_initial": 0.0, "pass_at_1_after_sft": 0.25}))
    last = history[-1].get("eval/pass_at_1")
    (folder / "summary.json").write_text(json.dumps({"steps": 3, "pass_at_1_after_rl": last, "wall_s": 2.0}))
