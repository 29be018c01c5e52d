"""One line, exit 2, for every bad model or number (issue 42 item 6): a file given for a model folder,
an empty folder, truncated weights, weights that do not match the config, an unknown architecture,
and extreme learning rates, through ``train``, ``sft``, ``eval``, ``select`` and ``serve``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from verigym.cli import app

torch.set_num_threads(1)
runner = CliRunner()

BAD = ("file", "empty", "truncated", "mismatched", "unknown_arch")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from verigym.policies import tiny

    root = tmp_path_factory.mktemp("models")
    good = root / "good"
    tiny.create("tiny", good, seed=0)
    out = {"good": good}
    (root / "file").write_text("not a model\n")
    out["file"] = root / "file"
    (root / "empty").mkdir()
    out["empty"] = root / "empty"
    for name in ("truncated", "mismatched", "unknown_arch"):
        shutil.copytree(good, root / name)
        out[name] = root / name
    weights = root / "truncated" / "model.safetensors"
    os.truncate(weights, weights.stat().st_size // 2)
    config = json.loads((good / "config.json").read_text())
    (root / "mismatched" / "config.json").write_text(json.dumps({**config, "intermediate_size": 128}))
    unknown = {**config, "model_type": "no_such_arch", "architectures": ["NoSuchForCausalLM"]}
    (root / "unknown_arch" / "config.json").write_text(json.dumps(unknown))
    return out


def _config(tmp: Path, model: Path, extra: str = "") -> Path:
    cfg = tmp / "c.toml"
    cfg.write_text(
        f'out_dir = "{tmp / "run"}"\n[model]\npath = "{model}"\n[[envs]]\nname = "arithmetic"\n'
        "[sampling]\nmax_tokens = 4\n[sft]\ndemos = 4\nmax_steps = 1\nbatch_size = 4\n"
        "[rl]\nsteps = 1\ngroups_per_step = 1\ngroup_size = 2\n[eval]\ntasks = 1\n" + extra
    )
    return cfg


def _one_line(result: object, *words: str) -> None:
    output = result.output  # type: ignore[attr-defined]
    assert result.exit_code == 2, output  # type: ignore[attr-defined]
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.strip()]
    error = [line for line in lines if line.startswith("error:")]
    assert len(error) == 1, output
    for word in words:
        assert word in " ".join(output.split()), (word, output)


WHAT = {
    "file": "is a file",
    "empty": "empty folder",
    "truncated": "truncated weights",
    "mismatched": "do not match",
    "unknown_arch": "no_such_arch",
}


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("command", ["train", "sft", "eval", "select", "serve"])
def test_a_bad_model_is_one_line_exit_2(
    command: str, bad: str, models: dict[str, Path], tmp_path: Path
) -> None:
    model = models[bad]
    if command in ("train", "sft"):
        args = [command, str(_config(tmp_path, model)), "--threads", "1"]
    elif command == "eval":
        args = ["eval", "arithmetic", "-m", str(model), "-n", "1", "--out", str(tmp_path / "e")]
    elif command == "select":
        args = ["select", "arithmetic", "-m", str(model), "-n", "1", "-N", "1", "--out", str(tmp_path / "s")]
    else:
        args = ["serve", str(model), "--port", "1"]
    what = WHAT[bad]
    if bad in ("file", "empty") and command in ("eval", "select", "serve"):
        what = "no model here" if bad == "empty" else what  # the folder resolver says it first
    _one_line(runner.invoke(app, args), what)


@pytest.mark.parametrize(
    ("command", "key", "value"),
    [
        ("train", "rl.lr", "1e300"),
        ("train", "rl.lr", "inf"),
        ("train", "rl.lr", "nan"),
        ("train", "rl.lr", "-1e-3"),
        ("train", "rl.max_grad_norm", "1e39"),
        ("sft", "sft.lr", "1e300"),
        ("sft", "sft.lr", "inf"),
    ],
)
def test_an_extreme_learning_rate_is_one_line_exit_2(
    command: str, key: str, value: str, models: dict[str, Path], tmp_path: Path
) -> None:
    args = [command, str(_config(tmp_path, models["good"])), "--set", f"{key}={value}"]
    _one_line(runner.invoke(app, args), key)


def test_the_good_model_still_loads_in_train(models: dict[str, Path], tmp_path: Path) -> None:
    from verigym.train import load_model
    from verigym.train.config import ModelConfig

    model, _ = load_model(ModelConfig(path=str(models["good"]), tiny=None))
    assert sum(p.numel() for p in model.parameters()) > 0
