"""A trained model remembers how it was trained (issue 44): every model directory a run writes carries
its training record, and ``eval``, ``select``, ``suite``, ``serve`` and ``verigym.evaluate`` use the
recorded arguments for that environment unless the user sets them, saying so in one line and in
``summary.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from verigym.cli import app
from verigym.policies.default import find_record
from verigym.policies.trained import FORMAT_VERSION, RECORD_FILE, RecordError, read_record

torch.set_num_threads(1)
runner = CliRunner()

LINE = "using calc's arguments from the checkpoint's training: schema=brief; --env-arg to change"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny calc quickstart (``schema=brief``, not calc's default) cut to 2 SFT steps and 1 RL step."""
    from verigym.recipes.quickstart_calc import calc_quickstart_config
    from verigym.train.pipeline import run_train

    out = tmp_path_factory.mktemp("calc") / "run"
    cfg = calc_quickstart_config(
        out,
        seed=0,
        sft__demos=16,
        sft__epochs=1,
        sft__max_steps=2,
        sft__batch_size=8,
        sft__eval_every=0,
        rl__steps=1,
        rl__groups_per_step=2,
        rl__group_size=2,
        eval__tasks=2,
        logging__report=False,
    )
    run_train(cfg)
    return out


def _eval(out: Path, *args: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    done = runner.invoke(
        app, ["eval", *args, "-n", "2", "--max-tokens", "32", "--threads", "1", "--out", str(out)]
    )
    assert done.exit_code == 0, done.output
    config = json.loads((out / "config.json").read_text())["config"]
    return " ".join(done.output.split()), config, json.loads((out / "summary.json").read_text())


def test_every_model_directory_of_a_run_carries_its_training_record(run: Path) -> None:
    dirs = [run / "sft", run / "checkpoint", *run.glob("checkpoints/step_*/model")]
    assert len(dirs) == 3
    final = read_record(run / "checkpoint")
    assert final is not None and final.format_version == FORMAT_VERSION
    assert (final.stage, final.step) == ("rl", 1)
    assert read_record(run / "sft").stage == "sft"  # type: ignore[union-attr]
    (calc,) = final.envs
    assert calc.name == "calc" and calc.args == {"schema": "brief"}
    assert calc.resolved["schema"] == "brief" and calc.resolved["verbose"] is False  # the prompt variant
    assert final.tool_format == "hermes" and final.base_model.startswith("tiny")
    assert (final.sampling.temperature, final.sampling.max_tokens) == (1.0, 64)
    assert final.verigym_version
    assert find_record(str(run)) == final  # a run directory names its final model
    for d in dirs:
        assert (d / RECORD_FILE).is_file()


def test_eval_uses_the_trained_arguments_and_says_so(run: Path, tmp_path: Path) -> None:
    output, config, summary = _eval(tmp_path / "a", "calc", "--model", str(run / "checkpoint"))
    assert LINE in output
    assert config["env_args"] == {"schema": "brief"}
    assert summary["env_args"] == {"schema": "brief"}
    assert summary["env_args_from"] == {"schema": "checkpoint"}
    record = json.loads((tmp_path / "a" / "results.jsonl").read_text().splitlines()[0])
    assert record["trajectory"]["prompt"][-1]["content"].endswith("=")  # the bare prompt it was trained on


def test_what_the_user_sets_wins_and_is_recorded_as_theirs(run: Path, tmp_path: Path) -> None:
    output, config, summary = _eval(tmp_path / "b", "calc", "--model", str(run), "--env-arg", "schema=full")
    assert "calc: --env-arg schema=full replaces the checkpoint's training (schema=brief)" in output
    assert config["env_args"] == {"schema": "full"}
    assert summary["env_args_from"] == {"schema": "user"}


def test_another_environment_keeps_its_own_defaults(run: Path, tmp_path: Path) -> None:
    output, config, summary = _eval(tmp_path / "c", "arithmetic", "--model", str(run / "checkpoint"))
    assert "checkpoint" not in output.split("local model")[0]
    assert config["env_args"] == {} and "env_args_from" not in summary


def test_a_resumed_eval_keeps_where_each_argument_came_from(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "d"
    _eval(out, "calc", "--model", str(run / "checkpoint"))
    done = runner.invoke(app, ["eval", "--out", str(out), "--resume", "--threads", "1"])
    assert done.exit_code == 0, done.output
    assert LINE in " ".join(done.output.split())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env_args_from"] == {"schema": "checkpoint"}


def test_the_library_applies_them_too(run: Path, tmp_path: Path) -> None:
    import verigym

    lines: list[str] = []
    result = verigym.evaluate(
        "calc",
        str(run),
        num_tasks=2,
        max_tokens=32,
        out=tmp_path / "e",
        on_event=lambda e: lines.append(e.message) if e.kind == "env_args" else None,
    )
    assert lines == [LINE]
    assert result.summary["env_args_from"] == {"schema": "checkpoint"}


def test_select_and_suite_use_them(run: Path, tmp_path: Path) -> None:
    args = ["--model", str(run / "checkpoint"), "-n", "2", "--max-tokens", "32", "--threads", "1"]
    done = runner.invoke(
        app, ["select", "calc", *args, "--samples", "2", "--method", "majority", "--out", str(tmp_path / "s")]
    )
    assert done.exit_code == 0, done.output
    assert LINE in " ".join(done.output.split())
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["env_args"] == {"schema": "brief"} and summary["env_args_from"] == {"schema": "checkpoint"}
    done = runner.invoke(app, ["eval", "--suite", "calc", *args, "--out", str(tmp_path / "u")])
    assert done.exit_code == 0, done.output
    assert LINE in " ".join(done.output.split())
    member = json.loads((tmp_path / "u" / "calc" / "summary.json").read_text())
    assert member["env_args_from"] == {"schema": "checkpoint"}


def test_serve_and_eval_open_the_model_in_its_trained_tool_format(run: Path, tmp_path: Path) -> None:
    from verigym._cli.serve_cmd import load_policy
    from verigym.policies.default import default_policy
    from verigym.train.checkpoint import link_model

    model = link_model(run / "checkpoint", tmp_path / "llama3" / "checkpoint")
    data = json.loads((model / RECORD_FILE).read_text())
    (model / RECORD_FILE).unlink()  # a hard link: replaced, never written through
    (model / RECORD_FILE).write_text(json.dumps({**data, "tool_format": "llama3"}))
    assert read_record(run / "checkpoint").tool_format == "hermes"  # type: ignore[union-attr]
    assert load_policy(str(model), None, "cpu", 8).tool_format == "llama3"
    assert default_policy(str(model))[0].tool_format == "llama3"
    assert default_policy(str(run / "checkpoint"))[0].tool_format == "hermes"


def test_a_newer_record_is_refused_in_one_line(run: Path, tmp_path: Path) -> None:
    from verigym.train.checkpoint import link_model

    model = link_model(run / "checkpoint", tmp_path / "newer")
    data = json.loads((model / RECORD_FILE).read_text())
    (model / RECORD_FILE).unlink()
    (model / RECORD_FILE).write_text(json.dumps({**data, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(RecordError, match="newer than this verigym reads") as info:
        read_record(model)
    assert "\n" not in str(info.value)
    done = runner.invoke(
        app, ["eval", "calc", "--model", str(model), "-n", "1", "--out", str(tmp_path / "x")]
    )
    assert done.exit_code == 2 and "upgrade verigym" in done.output


def test_each_line_says_what_the_checkpoint_gave_and_what_the_user_changed() -> None:
    from verigym.eval.trained import trained_args
    from verigym.policies.trained import EnvRecord, SamplingRecord, TrainingRecord

    def record(env: str, args: dict[str, Any], resolved: dict[str, Any]) -> TrainingRecord:
        return TrainingRecord(
            verigym_version="test",
            stage="rl",
            base_model="tiny",
            envs=[EnvRecord(name=env, args=args, resolved=resolved)],
            sampling=SamplingRecord(temperature=1.0, max_tokens=6),
        )

    defaults = record("arithmetic", {"level": 1}, {"level": 1, "verbose": False})
    same = trained_args("arithmetic", {}, defaults)
    assert same is not None and same.args == {}  # level=1 is arithmetic's default: nothing to add
    assert same.message == "arithmetic: the checkpoint was trained with arithmetic's default arguments"
    brief = record("calc", {"schema": "brief"}, {"schema": "brief", "digits": 3})
    both = trained_args("calc", {"digits": 2}, brief)
    assert both is not None and both.args == {"digits": 2, "schema": "brief"}
    assert both.sources == {"digits": "user", "schema": "checkpoint"}
    assert both.message.endswith("; --env-arg digits=2 replaces the checkpoint's training (digits=3)")
    given = trained_args("calc", {"schema": "brief"}, brief)
    assert given is not None and given.sources == {"schema": "user"}
    assert "--env-arg gives the arguments the checkpoint was trained with (schema=brief)" in given.message
    assert trained_args("arithmetic", {}, brief) is None  # not trained on it: its own defaults
