"""`verigym models` and `verigym models create`: listing with size/parameters/time, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from verigym.cli import app


def test_models_create_then_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VERIGYM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()
    empty = runner.invoke(app, ["models"])
    assert empty.exit_code == 0 and "No local checkpoints" in empty.output
    made = runner.invoke(app, ["models", "create", "tiny", "--out", "zoo/t1", "--seed", "3"])
    assert made.exit_code == 0, made.output
    assert (tmp_path / "zoo/t1/config.json").is_file() and "407,744" in made.output
    monkeypatch.setenv("VERIGYM_MODELS", str(tmp_path / "zoo"))
    listed = runner.invoke(app, ["models"])
    assert listed.exit_code == 0 and "t1" in listed.output and "407,744" in listed.output
    assert "config" in listed.output
    again = runner.invoke(app, ["models", "create", "tiny", "--out", "zoo/t1"])
    assert again.exit_code == 2 and "not an empty directory" in again.output
    bad = runner.invoke(app, ["models", "create", "huge", "--out", "zoo/t2"])
    assert bad.exit_code == 2 and "tiny, small, base" in bad.output
