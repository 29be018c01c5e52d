"""``verigym eval URL`` on ``verigym env-server calc`` scores as ``verigym eval calc`` does, with the same seed
and policy, through each road the client has: OpenEnv over ``WS /ws``, OpenEnv over verigym's HTTP
sessions, and the Open Reward Standard. The policy is local: a scripted one that is right on some tasks
and wrong on others, and the in-process tiny model (same sampled ids on both sides).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import verigym
from verigym.cli import app
from verigym.envs.registry import load_env
from verigym.envserver import EnvServer
from verigym.eval.store import load_records
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.types import Message, Record, ToolCall

runner = CliRunner()


@pytest.fixture(scope="module")
def calc_url() -> Iterator[str]:
    with EnvServer({"calc": load_env("calc")}) as srv:
        yield srv.url


def half_right() -> ScriptedPolicy:
    """Calls ``calc`` on the asked product, then answers with its result, off by one when the first factor
    is odd: some samples score 1, some 0, and ``tool_call_ok`` is 1 on all."""

    def reply(messages: Sequence[Message]) -> Reply:
        asked = re.search(r"(\d+)\*(\d+)", next(m.content for m in messages if m.role == "user"))
        assert asked is not None
        result = next((m.content for m in reversed(messages) if m.role == "tool"), None)
        if result is None:
            return "", [ToolCall(id="c0", name="calc", arguments=json.dumps({"expr": asked.group(0)}))]
        return str(int(result) + int(asked.group(1)) % 2)

    return ScriptedPolicy(reply, name="half-right")


def by_key(path: Path) -> dict[tuple[str, int], Record]:
    return {(r.task_id, r.sample_index): r for r in load_records(path)}


def same_scores(local: Path, remote: Path) -> None:
    a, b = by_key(local / "results.jsonl"), by_key(remote / "results.jsonl")
    assert a.keys() == b.keys()
    for key, want in a.items():
        got = b[key]
        assert got.error is None and want.error is None, (key, got.error)
        assert got.score.reward == want.score.reward, key
        assert {n: g.score for n, g in got.score.grades.items()} == {
            n: g.score for n, g in want.score.grades.items()
        }, key
        assert got.trajectory.messages == want.trajectory.messages, key
    sa, sb = (json.loads((p / "summary.json").read_text()) for p in (local, remote))
    fields = ("n_samples", "n_scored", "n_errors", "reward_mean", "pass_at_k", "grader_means", "stop_reasons")
    for field in (*fields, "completion_tokens_mean", "truncation_rate", "tool_call_parse_failures"):
        assert sa.get(field) == sb.get(field), field


@pytest.mark.parametrize(
    ("form", "args"),
    [("{url}", {}), ("{url}", {"transport": "http"}), ("ors+{url}", {})],
    ids=["openenv-ws", "openenv-http", "ors"],
)
def test_remote_calc_scores_as_local_calc(
    calc_url: str, tmp_path: Path, form: str, args: dict[str, Any]
) -> None:
    options = {"num_tasks": 20, "samples_per_task": 2, "seed": 3, "concurrency": 8}
    local = verigym.evaluate("calc", half_right(), out=tmp_path / "local", **options)
    address = form.format(url=calc_url)
    remote = verigym.evaluate(address, half_right(), out=tmp_path / "remote", env_args=args, **options)
    assert 0 < local.summary["reward_mean"] < 1  # both right and wrong answers are compared
    same_scores(tmp_path / "local", tmp_path / "remote")
    (record, *_) = load_records(remote.results_file)
    expect = "ors" if form.startswith("ors") else "openenv"
    assert record.trajectory.state["protocol"] == expect and record.trajectory.state["server"] == calc_url


def test_cli_eval_url_with_the_tiny_model_samples_the_same_ids(calc_url: str, tmp_path: Path) -> None:
    common = ["-n", "20", "--seed", "0", "--model", "tiny", "--max-tokens", "24"]
    for name, env in (("local", "calc"), ("remote", calc_url)):
        result = runner.invoke(app, ["eval", env, *common, "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
    same_scores(tmp_path / "local", tmp_path / "remote")
    a, b = by_key(tmp_path / "local" / "results.jsonl"), by_key(tmp_path / "remote" / "results.jsonl")
    for key, want in a.items():
        got = [c.completion_token_ids for c in b[key].trajectory.completions]
        assert got == [c.completion_token_ids for c in want.trajectory.completions], key
        assert all(c.token_ids_exact for c in b[key].trajectory.completions)


TRAIN = """
seed = 1
out_dir = "{out}"

[[envs]]
name = "{url}"

[sampling]
max_tokens = 8

[rl]
preset = "grpo"
steps = 2
groups_per_step = 2
group_size = 4

[eval]
tasks = 4
"""


def test_a_train_config_naming_the_url_trains_on_the_served_environment(
    calc_url: str, tmp_path: Path
) -> None:
    cfg = tmp_path / "train.toml"
    cfg.write_text(TRAIN.format(out=tmp_path / "run", url=calc_url))
    result = runner.invoke(app, ["train", str(cfg), "--threads", "1"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["train_samples"] == 16 and summary["train_samples_errored"] == 0
    assert summary[f"eval/{calc_url}/errors"] == 0 and summary["eval/samples"] == 4


def test_a_keyed_server_takes_the_key_from_api_key_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verigym.envs.registry import EnvError

    with EnvServer({"calc": load_env("calc")}, api_key="s3cret") as srv:
        with pytest.raises(EnvError, match="HTTP 401: the API key is missing or wrong"):
            load_env(srv.url)
        monkeypatch.setenv("CALC_KEY", "s3cret")
        for address in (srv.url, f"ors+{srv.url}"):
            env = load_env(address, api_key_env="CALC_KEY")
            run = verigym.evaluate(env, half_right(), out=tmp_path / address[:3], num_tasks=4, seed=3)
            assert run.summary["n_errors"] == 0 and run.summary["n_samples"] == 4
