"""The select experiment end to end on the arithmetic env with a synthetic confident/unconfident policy."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigym.envs.registry import load_env
from verigym.record import FORMAT_VERSION, read_run
from verigym.select.experiment import run_experiment
from verigym.select.run import SelectConfig
from verigym.types import Completion, Message, Sampling, Usage


class ConfidencePolicy:
    """Right answers with high token confidence and a long tail; wrong ones dip in confidence.

    Wrong answers agree with each other (the same off-by-one), so a plain majority often picks
    them; DeepConf should not.
    """

    name = "synthetic"

    async def complete(
        self, messages: Sequence[Message], *, tools: Any = None, sampling: Sampling
    ) -> Completion:
        rng = random.Random(sampling.seed)
        a, op, b = re.match(r"(\d+)([+-])(\d+)", messages[-1].content).groups()  # type: ignore[union-attr]
        value = int(a) + int(b) if op == "+" else int(a) - int(b)
        right = rng.random() < 0.4
        text = f"the sum is {value if right else value + 1}"
        confs = [4.0 if right else (4.0 if i % 5 else 0.5) for i in range(len(text))]
        tops = tuple(tuple(-c for _ in range(sampling.top_logprobs or 1)) for c in confs)
        return Completion(
            text=text,
            top_logprobs=tops if sampling.top_logprobs else None,
            usage=Usage(prompt_tokens=6, completion_tokens=len(text)),
        )


async def test_experiment_writes_summary_and_report(tmp_path: Path) -> None:
    env = load_env("arithmetic", level=2)
    tasks = env.tasks(6, seed=0)
    cfg = SelectConfig(methods=["majority", "deepconf", "deepconf-online"], ns=[1, 4, 8], eta=0.2, draws=2)
    await run_experiment(
        env, ConfidencePolicy(), tasks, cfg, sampling=Sampling(seed=1), out=tmp_path, env_name="arithmetic"
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (tmp_path / "report.html").read_text().count("data:image/png;base64") == 1
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 6 * 8
    assert summary["ns"] == [1, 4, 8] and set(summary["methods"]) == {
        "majority",
        "deepconf",
        "deepconf-online",
    }
    by = {m: {r["n"]: r for r in rows} for m, rows in summary["methods"].items()}
    oracle = {o["n"]: o["pass_at_n"] for o in summary["oracle_pass_at_n"]}
    assert by["deepconf"][8]["accuracy"] == oracle[8]  # a right trace always wins when there is one
    assert by["majority"][8]["accuracy"] < 1.0
    online = {o["n"]: o for o in summary["deepconf_online_vs_majority"]}
    assert online[8]["reaches_majority_with_fewer_tokens"] is True
    assert by["deepconf-online"][8]["stopped_per_task"] > 0
    assert by["deepconf-online"][8]["tokens_per_task"] < by["majority"][8]["tokens_per_task"]
    assert any(c["verdict"] == "beats majority" for c in summary["vs_majority_at_equal_tokens"])
    assert "subsets" in summary["notes"]["subsampling"]
    run = read_run(tmp_path)  # the run record: header in run.json and in summary.json
    assert run.kind == "select" and run.format_version == FORMAT_VERSION and run.finished
    assert summary["format_version"] == FORMAT_VERSION and summary["run"]["kind"] == "select"
    assert run.header is not None and run.header.config["methods"] == cfg.methods and run.header.wall_s
    assert run.summary is not None and run.summary.model_dump()["methods"] == summary["methods"]


async def test_best_of_n_with_a_grader_reaches_pass_at_n() -> None:
    from verigym.envs.builtin.arithmetic import correct
    from verigym.rubric import Grader
    from verigym.select.run import measure, oracle_points

    env = load_env("arithmetic", level=2)
    tasks = env.tasks(4, seed=0)
    cfg = SelectConfig(methods=["majority"], ns=[1, 4], draws=2)
    res = await run_experiment(env, ConfidencePolicy(), tasks, cfg, sampling=Sampling(seed=2))
    # the environment's own verifier as the best-of-N grader: an oracle, so it must equal pass@N
    bon = SelectConfig(methods=["best-of-n"], ns=[1, 4], draws=2, grader=Grader(correct, name="correct"))
    points = (await measure(res.pools, bon))["best-of-n"]
    oracle = oracle_points(res.pools, [1, 4], 2, 0)
    assert [p.accuracy for p in points] == [o["pass_at_n"] for o in oracle]
    assert points[-1].selector_calls == 0 and points[-1].fallbacks == 0
