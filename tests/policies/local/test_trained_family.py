"""A fine-tuned model is still its family (issue 44 item 3): a SmolLM2 checkpoint directory, named like
any run's ``checkpoint/``, gets the real-model defaults its catalogue name gets on an environment it
was not trained on, and on the one it was trained on the arguments and tool format of its record."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from verigym.cli import app
from verigym.policies.catalogue import pull
from verigym.policies.trained import RECORD_FILE, EnvRecord, SamplingRecord, TrainingRecord, write_record
from verigym.train.checkpoint import link_model

runner = CliRunner()


def _checkpoint(tmp_path: Path) -> Path:
    """SmolLM2's files hard-linked into ``RUN/checkpoint`` (no second copy on disk)."""
    return link_model(pull("smollm2-135m-instruct"), tmp_path / "run" / "checkpoint")


def _eval(out: Path, env: str, model: Path) -> tuple[str, dict[str, object]]:
    args = ["eval", env, "--model", str(model), "-n", "1", "--max-tokens", "4", "--threads", "1"]
    done = runner.invoke(app, [*args, "--out", str(out)])
    assert done.exit_code == 0, done.output
    return " ".join(done.output.split()), json.loads((out / "summary.json").read_text())


def test_a_checkpoint_gets_its_familys_real_model_defaults(tmp_path: Path) -> None:
    model = _checkpoint(tmp_path)
    assert not (model / RECORD_FILE).exists()
    output, summary = _eval(tmp_path / "a", "arithmetic", model)
    assert "arithmetic: verbose=True for a pretrained model" in output
    assert summary["env_args"] == {"verbose": True}
    assert summary["env_args_from"] == {"verbose": "real_model"}


def test_a_trained_checkpoint_gets_its_records_arguments_and_tool_format(tmp_path: Path) -> None:
    from verigym.policies.default import default_policy

    model = _checkpoint(tmp_path)
    record = TrainingRecord(
        verigym_version="test",
        stage="rl",
        step=12,
        base_model="smollm2-135m-instruct",
        envs=[EnvRecord(name="calc", args={"verbose": True}, resolved={"verbose": True, "schema": "full"})],
        tool_format="smollm2",
        sampling=SamplingRecord(temperature=1.0, max_tokens=48),
    )
    write_record(model, record)
    output, summary = _eval(tmp_path / "b", "calc", model)
    assert (
        "using calc's arguments from the checkpoint's training: verbose=true; --env-arg to change" in output
    )
    assert summary["env_args_from"] == {"verbose": "checkpoint"}
    assert default_policy(str(model))[0].tool_format == "smollm2"
