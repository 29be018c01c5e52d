"""``verigym train`` / ``verigym sft`` end to end on a tiny budget, and their one-line config errors."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from typer.testing import CliRunner

from verigym.cli import app

torch.set_num_threads(1)

CONFIG = """
seed = 1
out_dir = "{out}"

[[envs]]
name = "arithmetic"
args = {{ level = 1, size = 50 }}

[sampling]
max_tokens = 5

[sft]
demos = 16
max_steps = 2
batch_size = 8

[rl]
preset = "{preset}"
steps = 2
groups_per_step = 2
group_size = 4

[eval]
tasks = 4
"""


def test_train_cli_runs_sft_then_rl_and_writes_the_run(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG.format(out=tmp_path / "run", preset="gspo"))
    result = CliRunner().invoke(app, ["train", str(cfg), "--set", "rl.lr=5e-4", "--threads", "1"])
    assert result.exit_code == 0, result.output
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["sft_steps"] == 2 and "pass_at_1_after_rl" in summary
    assert (run / "checkpoint" / "config.json").is_file() and (run / "report.html").is_file()
    saved = json.loads((run / "train_config.json").read_text())
    assert saved["rl"]["lr"] == 5e-4 and saved["rl"]["loss"] == "gspo"
    phases = [json.loads(line)["phase"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert phases == ["sft", "sft", "rl", "rl"]
    # the final model is the last checkpoint's files, linked: one copy on disk, and the cost is stated
    weights = next((run / "checkpoint").glob("*.safetensors"))
    assert (
        weights.stat().st_ino == (run / "checkpoints" / "step_000002" / "model" / weights.name).stat().st_ino
    )
    assert summary["model_mb"] > 0 and summary["resume_state_mb"] > 0
    assert "On disk:" in result.output and "needed only to --resume" in result.output

    sft = CliRunner().invoke(app, ["sft", str(cfg), "--out", str(tmp_path / "sft_run"), "--threads", "1"])
    assert sft.exit_code == 0, sft.output
    assert (tmp_path / "sft_run" / "sft" / "config.json").is_file()


def test_train_cli_config_errors_are_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[rl]\npreset = "dapo"\nclip_higher = 0.3\n')
    result = CliRunner().invoke(app, ["train", str(cfg)])
    assert result.exit_code == 2
    assert "rl.clip_higher: unknown key" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["train", str(cfg), "--preset", "nope"])
    assert result.exit_code == 2 and "unknown preset" in result.output


def test_train_on_a_profiled_band_records_task_history(tmp_path: Path) -> None:
    from verigym.envs.registry import load_env

    tasks = load_env("arithmetic", level=1, size=50).tasks(None, seed=1, split="train")
    rates = {t.id: (0.5 if i % 2 else 1.0) for i, t in enumerate(tasks)}  # odd tasks in (0, 1)
    profile = tmp_path / "profile.jsonl"
    profile.write_text(
        "".join(json.dumps({"task_id": t, "pass_rate": r, "samples": 4}) + "\n" for t, r in rates.items())
    )
    cfg = tmp_path / "c.toml"
    text = CONFIG.format(out=tmp_path / "run", preset="grpo")
    text = text.replace(
        "args = { level = 1, size = 50 }",
        f'args = {{ level = 1, size = 50 }}\nprofile = "{profile}"\nband = [0.0, 1.0]',
    )
    cfg.write_text(text)
    result = CliRunner().invoke(app, ["train", str(cfg), "--threads", "1"])
    assert result.exit_code == 0, result.output
    steps = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    seen = {k.split("/", 1)[1] for s in steps if s["phase"] == "rl" for k in s["task_pass_rates"]}
    assert seen and all(rates[t] == 0.5 for t in seen)  # only in-band tasks were trained on
    ranked = CliRunner().invoke(app, ["select-tasks", str(tmp_path / "run"), "--top", "3"])
    assert ranked.exit_code == 0, ranked.output

    cfg.write_text(text.replace("band = [0.0, 1.0]", "band = [0.9, 1.0]"))  # nothing strictly inside
    empty = CliRunner().invoke(app, ["train", str(cfg), "--threads", "1", "--out", str(tmp_path / "r2")])
    assert empty.exit_code == 2 and "no training task is left" in empty.output


def test_shipped_quickstart_config_matches_the_quickstart() -> None:
    from verigym.recipes.quickstart import quickstart_config
    from verigym.train.config import load_config

    shipped = load_config(Path(__file__).resolve().parents[2] / "configs" / "quickstart.toml")
    assert shipped.model_dump(exclude={"out_dir"}) == quickstart_config().model_dump(exclude={"out_dir"})
