"""Run in the bench venv (inspect-ai installed): a verigym ``results.jsonl`` written as an inspect ``.eval`` log.

    .bench/venv/bin/python benchmarks/_inspect_log_side.py RESULTS.jsonl OUT.eval

Each record becomes an ``EvalSample`` (id = task id, epoch = sample index + 1) with the same
messages (system, user, the assistant's reply and tool calls, tool results), the reply as the output,
each grader as a score and an errored record's error; the log's header carries the task, model and
a mean-reward metric, as ``inspect eval`` would write it. Used by ``benchmarks/view_scale.py --inspect``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from inspect_ai._util.error import EvalError
from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalLog,
    EvalMetric,
    EvalPlan,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    write_eval_log,
)
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ModelOutput,
)
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall


def _message(m: dict[str, Any]) -> Any:
    role, content = m["role"], m.get("content") or ""
    if role == "system":
        return ChatMessageSystem(content=content)
    if role == "user":
        return ChatMessageUser(content=content)
    if role == "tool":
        return ChatMessageTool(content=content, tool_call_id=m.get("tool_call_id"), function=m.get("name"))
    calls = [
        ToolCall(id=c["id"], function=c["name"], arguments=json.loads(c.get("arguments") or "{}"))
        for c in m.get("tool_calls") or []
    ]
    return ChatMessageAssistant(content=content, tool_calls=calls or None)


def sample(record: dict[str, Any]) -> EvalSample:
    t = record["trajectory"]
    prompt = [_message(m) for m in t["prompt"]]
    turns = [_message(m) for turn in t["turns"] if turn["source"] != "branch" for m in turn["messages"]]
    final = next((m for m in reversed(turns) if isinstance(m, ChatMessageAssistant)), None)
    scores = {
        name: Score(value=g["score"] if g["score"] is not None else 0.0, explanation=g.get("detail") or None)
        for name, g in record["score"]["grades"].items()
    }
    error = record.get("error")
    return EvalSample(
        id=record["task_id"],
        epoch=record["sample_index"] + 1,
        input=prompt,
        target="",
        messages=prompt + turns,
        output=ModelOutput.from_content(record["model"], final.text if final else ""),
        scores=scores or None,
        total_time=record["wall_s"],
        error=EvalError(message=error["message"], traceback="", traceback_ansi="") if error else None,
    )


def main() -> None:
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    samples = []
    with src.open() as fh:
        for line in fh:
            samples.append(sample(json.loads(line)))
    rewards = [s.scores["correct"].value for s in samples if s.scores and "correct" in s.scores]
    mean = sum(float(v) for v in rewards) / max(1, len(rewards))  # type: ignore[arg-type]
    first = json.loads(src.open().readline())
    log = EvalLog(
        status="success",
        eval=EvalSpec(
            created="2026-11-28T00:00:00+00:00",
            task=first["env"],
            dataset=EvalDataset(samples=len({s.id for s in samples})),
            model=first["model"],
            config=EvalConfig(epochs=max(int(s.epoch) for s in samples)),
        ),
        plan=EvalPlan(),
        results=EvalResults(
            total_samples=len(samples),
            completed_samples=len(samples),
            scores=[
                EvalScore(
                    name="correct", scorer="correct", metrics={"mean": EvalMetric(name="mean", value=mean)}
                )
            ],
        ),
        stats=EvalStats(started_at="2026-11-28T00:00:00+00:00", completed_at="2026-11-28T00:10:00+00:00"),
        samples=samples,
    )
    write_eval_log(log, str(out))
    print(f"{len(samples)} samples -> {out} ({out.stat().st_size / 2**20:.1f} MB)")


if __name__ == "__main__":
    main()
