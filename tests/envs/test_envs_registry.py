"""Registry (built-ins, registered, entry points, import specs), check_env, and the CLI commands."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import verigym
from verigym.cli import app
from verigym.envs import registry
from verigym.envs.base import SingleTurnEnv
from verigym.envs.builtin.arithmetic import ArithmeticEnv
from verigym.envs.check import check_env
from verigym.envs.registry import (
    EnvArgError,
    UnknownEnvError,
    env_arguments,
    list_envs,
    load_env,
    register_env,
)
from verigym.rubric import Grader, Rubric
from verigym.types import Message, Task, Trajectory


class Leaky(SingleTurnEnv):
    """An environment that shows its hidden data (for the checker)."""

    name = "leaky"
    description = "Leaks its info."

    def __init__(self, leak: bool = True, grader_fails: bool = False, nondeterministic: bool = False) -> None:
        def grade(task: Task, t: Trajectory) -> float:
            if grader_fails:
                raise KeyError("missing")
            return 0.0

        super().__init__(rubric=Rubric([Grader(grade, name="g")]))
        self.leak, self.calls, self.nondeterministic = leak, 0, nondeterministic

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        if split != "test":
            raise ValueError(f"no split {split!r}")
        self.calls += 1
        secret = "gold-4242"
        text = f"q {secret}" if self.leak else "q"
        if self.nondeterministic:
            text += str(self.calls)
        return [
            Task(id=f"l{i}", prompt=(Message(role="user", content=f"{text} {i}"),), info={"x": secret})
            for i in range(n or 3)
        ]


@pytest.fixture(autouse=True)
def clean_registry() -> Any:
    described = dict(registry._DESCRIBED)
    with registry.ENVS.scoped():
        yield
    registry._DESCRIBED.clear()
    registry._DESCRIBED.update(described)


def test_builtins_load_lazily_by_name() -> None:
    code = "import sys, verigym; assert 'verigym.envs.registry' not in sys.modules; assert 'verigym.envs.builtin.arithmetic' not in sys.modules; e = verigym.load_env('arithmetic', level=2); print(type(e).__name__, e.level)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ArithmeticEnv 2"
    assert "arithmetic" in list_envs() and list_envs()["arithmetic"].startswith("Integer arithmetic")


def test_unknown_env_and_bad_args_are_one_line() -> None:
    with pytest.raises(UnknownEnvError, match=r"unknown environment 'arith'; expected one of .*arithmetic"):
        load_env("arith")
    with pytest.raises(EnvArgError, match="has no argument 'lvl' \\(its arguments: level, digits"):
        load_env("arithmetic", lvl=2)
    with pytest.raises(EnvArgError, match="level must be"):
        load_env("arithmetic", level=99)
    with pytest.raises(UnknownEnvError, match="no module named 'no_such_pkg'"):
        load_env("no_such_pkg.envs:Env")

    def needs(path: str) -> ArithmeticEnv:
        return ArithmeticEnv()

    register_env("needs", needs, "Needs a path.")
    with pytest.raises(EnvArgError, match="needs argument 'path'"):
        load_env("needs")
    register_env("not-env", lambda: 42, "Returns a number.")
    with pytest.raises(registry.EnvError, match="not an Environment"):
        load_env("not-env")


def test_register_env_and_import_specs(tmp_path: Path) -> None:
    register_env("leaky", Leaky)
    assert list_envs()["leaky"] == "Leaks its info."
    assert isinstance(load_env("leaky", leak=False), Leaky)
    register_env("arith3", "verigym.envs.builtin.arithmetic:ArithmeticEnv", "Level three.")
    assert load_env("arith3", level=3).level == 3
    path = tmp_path / "my_env.py"
    path.write_text(
        "from verigym.envs.builtin.arithmetic import ArithmeticEnv\nenv = ArithmeticEnv(level=2)\n"
    )
    env = load_env(f"{path}:env")
    assert isinstance(env, ArithmeticEnv) and env.level == 2
    with pytest.raises(EnvArgError, match="instance and takes no arguments"):
        load_env(f"{path}:env", level=3)
    with pytest.raises(UnknownEnvError, match="has no attribute 'nope'"):
        load_env(f"{path}:nope")
    assert isinstance(load_env("verigym.envs.builtin.arithmetic:ArithmeticEnv"), ArithmeticEnv)


def test_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = [
        importlib.metadata.EntryPoint(
            "third", "verigym.envs.builtin.arithmetic:ArithmeticEnv", "verigym.envs"
        ),
        importlib.metadata.EntryPoint("broken", "no_such_pkg:Env", "verigym.envs"),
    ]

    def fake(group: str) -> list[importlib.metadata.EntryPoint]:
        return eps if group == "verigym.envs" else []

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    listed = list_envs()
    assert listed["third"] == ArithmeticEnv.description
    assert listed["broken"].startswith("(cannot load no_such_pkg:Env")
    assert load_env("third", level=5).level == 5
    assert env_arguments("third").startswith("level=1, digits=None, terms=None")
    assert CliRunner().invoke(app, ["envs"]).exit_code == 0  # a broken package is listed, not fatal


def test_check_env_passes_arithmetic_and_catches_problems() -> None:
    report = check_env(load_env("arithmetic", level=3), n=6)
    assert report.ok, report.failures
    assert {r.name: r.status for r in report.results} == dict.fromkeys(
        ["tasks", "hidden-info", "rollout", "graders", "json", "oracle", "null"], "pass"
    )
    leaky = check_env(Leaky())
    assert [f.name for f in leaky.failures] == ["hidden-info"] and "gold-4242" in leaky.failures[0].detail
    assert {r.name: r.status for r in leaky.results}["oracle"] == "skip"
    broken = check_env(Leaky(leak=False, grader_fails=True))
    assert [f.name for f in broken.failures] == ["graders"] and "KeyError" in broken.failures[0].detail
    drifting = check_env(Leaky(leak=False, nondeterministic=True))
    assert [f.name for f in drifting.failures] == ["tasks"] and "differ" in drifting.failures[0].detail


def test_check_env_catches_unserialisable_state_and_broken_oracle() -> None:
    class Stateful(Leaky):
        def setup_state(self, task: Task) -> dict[str, Any]:
            return {"handle": object()}  # not JSON: the trajectory cannot be stored

        def oracle_policy(self) -> Any:
            return self.null_policy() or ArithmeticEnv().null_policy()

    report = check_env(Stateful(leak=False))
    statuses = {r.name: r.status for r in report.results}
    assert statuses["json"] == "fail" and statuses["oracle"] == "fail"
    assert "mean reward 0.000" in next(r.detail for r in report.results if r.name == "oracle")


def test_cli_envs_and_check_env(tmp_path: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["envs"])
    assert listed.exit_code == 0 and "arithmetic" in listed.output and "level=1" in listed.output
    ok = runner.invoke(app, ["check-env", "arithmetic", "--env-arg", "level=2", "--seed", "3", "-n", "4"])
    assert ok.exit_code == 0 and "all checks passed" in ok.output
    for args, message in (
        (["check-env", "nope"], "unknown environment 'nope'"),
        (["check-env", "arithmetic", "--env-arg", "level=7"], "level must be"),
        (["check-env", "arithmetic", "--env-arg", "colour=red"], "no argument 'colour'"),
        (["check-env", "arithmetic", "--env-arg", "level"], "expected key=value"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    path = tmp_path / "leaky_env.py"
    path.write_text(
        f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\nfrom test_envs_registry import Leaky\n"
    )
    failed = runner.invoke(app, ["check-env", f"{path}:Leaky"])
    assert failed.exit_code == 1 and "FAIL" in failed.output


def test_verigym_namespace_exports_load_env() -> None:
    assert "load_env" in verigym.__all__ and verigym.load_env is load_env


def test_cli_malformed_dataset_is_exit_2(tmp_path: Path) -> None:
    data = tmp_path / "qa.jsonl"
    data.write_text('{"question": "a", "answer": "1"}\n{"question": "b"}\n')
    spec = tmp_path / "qa_env.py"
    spec.write_text(
        "from verigym.envs import DatasetEnv\n"
        f"def load():\n    return DatasetEnv({str(data)!r}, name='qa', oracle_reply=lambda t: 'x')\n"
    )
    result = CliRunner().invoke(app, ["check-env", f"{spec}:load"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "qa.jsonl:2: missing field 'answer'" in result.output
    data.write_text('{"question": "a", "answer": "1"}\n')
    report = check_env(load_env(f"{spec}:load"))
    assert {r.name: r.status for r in report.results}["oracle"] == "fail"  # oracle_reply is used
