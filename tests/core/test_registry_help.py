"""The CLI says what the registries hold (issue 40): ``--tool-format`` names every built-in tool format,
``--grader`` every built-in grader family, ``--method`` every selection method, ``verigym envs``
every environment; and every command that opens a model takes ``--dtype`` and ``--tool-format``."""

from __future__ import annotations

import re
from typing import Any

from typer.main import get_command
from typer.testing import CliRunner

from verigym.cli import app
from verigym.envs.registry import ENVS
from verigym.graders.families import FAMILIES
from verigym.policies.local.chat import TOOL_FORMATS
from verigym.policies.spec import DTYPE_CHOICES
from verigym.select.methods import method_names

OPENS_A_MODEL = ("eval", "suite", "profile", "synth", "select", "serve", "train", "sft")


def _command(name: str) -> Any:
    return get_command(app).commands[name]  # type: ignore[attr-defined]


def _help(command: str, option: str) -> str:
    return next(str(p.help) for p in _command(command).params if p.name == option)


def test_every_command_that_opens_a_model_takes_dtype_and_tool_format() -> None:
    for command in OPENS_A_MODEL:
        names = {p.name for p in _command(command).params}
        assert {"dtype", "tool_format"} <= names, command
        assert _help(command, "dtype") == _help("eval", "dtype")  # one wording everywhere
        assert _help(command, "tool_format") == _help("eval", "tool_format")


def test_the_model_flags_name_what_the_registries_hold() -> None:
    said = re.search(r"\(([a-z0-9_, ]+);", _help("eval", "tool_format"))
    assert said is not None
    assert tuple(said.group(1).split(", ")) == TOOL_FORMATS.builtin_names
    assert all(d in _help("eval", "dtype") for d in DTYPE_CHOICES)


def test_grader_and_method_help_name_every_built_in() -> None:
    grader = _help("verifier-bench", "grader")
    missing = [name for name in FAMILIES.builtin_names if name not in re.findall(r"[a-z_]+", grader)]
    assert not missing, f"--grader's help does not name {missing}"
    method = _help("select", "method")
    assert all(name in method for name in method_names())


def test_verigym_envs_lists_the_registry() -> None:
    out = CliRunner().invoke(app, ["envs"], env={"COLUMNS": "200"}).output
    assert all(name in out for name in ENVS.builtin_names)
