"""The embedded default policy and checkpoint discovery (explicit path, quickstart output, fresh tiny)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from verigym.policies import default
from verigym.policies.local import LocalPolicy


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VERIGYM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VERIGYM_MODELS", raising=False)
    return tmp_path / "home"


def test_no_checkpoint_builds_the_untrained_tiny_model(home: Path) -> None:
    policy, message = default.default_policy(None)
    assert isinstance(policy, LocalPolicy)
    assert "untrained" in message and "verigym quickstart" in message
    assert default.find_checkpoints() == []


def test_explicit_path_and_quickstart_checkpoint_are_used(
    home: Path, tiny_dir: Path, adapter_dir: Path
) -> None:
    policy, message = default.default_policy(str(tiny_dir))
    assert message == f"local model {tiny_dir}"
    assert tiny_dir.name == "model" and policy.name == tiny_dir.parent.name  # named after its run
    with pytest.raises(ValueError, match="no model here"):
        default.default_policy(str(home.parent))
    qs = Path("runs/quickstart/checkpoint")
    shutil.copytree(tiny_dir, qs)
    policy, message = default.default_policy(None)
    assert message.startswith("quickstart checkpoint runs/quickstart/checkpoint")
    # a trainer's run layout (checkpoints/latest -> step/model) under $VERIGYM_HOME, newer than ./runs
    step = home / "runs" / "quickstart" / "checkpoints" / "step_000002" / "model"
    shutil.copytree(adapter_dir, step)
    (step.parent.parent / "latest").write_text("step_000002\n")
    newest = default.newest_quickstart()
    assert newest is not None and newest.path == step
    policy, message = default.default_policy(None)
    assert policy.active_adapter == "default" and str(step) in message


def test_configured_paths_are_listed(home: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = Path("zoo")
    shutil.copytree(tiny_dir, folder / "a")
    shutil.copytree(tiny_dir, folder / "b")
    home.mkdir(parents=True)
    (home / "config.toml").write_text(f'[models]\npaths = ["{folder.resolve()}"]\n')
    monkeypatch.setenv("VERIGYM_MODELS", str(tiny_dir))
    found = default.find_checkpoints()
    assert [c.path.name for c in found] == [tiny_dir.name, "a", "b"]
    assert {c.source for c in found} == {"config"}
    (home / "config.toml").write_text("[models]\npaths = 3\n")
    with pytest.raises(ValueError, match=r"config\.toml"):
        default.find_checkpoints()
