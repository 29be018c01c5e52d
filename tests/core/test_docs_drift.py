"""Numbers in the docs come from the code (issue 44 item 4): the README's counts and recipe settings and
the ``(default N)`` of each ``--help`` are checked against the registries, the recipe configs and
the options' own defaults, so a changed count or default fails here until the text says it too."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from typer.main import get_command

from verigym.cli import app
from verigym.envs.registry import _builtins
from verigym.eval.config import EvalConfig
from verigym.recipes.quickstart import quickstart_config
from verigym.recipes.quickstart_calc import calc_quickstart_config
from verigym.recipes.quickstart_real import real_calc_config, real_quickstart_config
from verigym.train.config import PRESETS, TrainConfig

README = Path(__file__).resolve().parents[2] / "README.md"
WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "twenty-one",
    "twenty-two",
    "twenty-three",
    "twenty-four",
]


def _readme() -> str:
    return " ".join(README.read_text(encoding="utf-8").split())  # one line: phrases wrap anywhere


def _lr(value: float) -> str:
    return re.sub(r"e-0*", "e-", f"{value:.0e}")  # 6e-4, as the README writes a learning rate


def _recipes() -> dict[str, TrainConfig]:
    return {
        "tiny": quickstart_config("x"),
        "calc": calc_quickstart_config("x"),
        "real": real_quickstart_config("x", model="m"),
        "real_calc": real_calc_config("x", model="m"),
    }


def test_the_readme_counts_the_built_in_environments() -> None:
    text = _readme()
    said = re.findall(r"\b([A-Z][a-z-]+) built-ins\b", text)
    assert said, "the README no longer says how many built-in environments there are"
    assert [WORDS.index(w.lower()) for w in said] == [len(_builtins())] * len(said), said
    missing = [name for name in _builtins() if f"`{name}`" not in text]
    assert not missing, f"built-ins the README does not name: {missing}"


def test_the_readme_lists_every_preset() -> None:
    listed = re.search(r"Presets: ((?:`\w+`(?: \([^)]*\))?,? ?(?:and )?)+)", _readme())
    assert listed is not None
    assert set(re.findall(r"`(\w+)`", listed.group(1))) == set(PRESETS)


def test_the_readme_states_the_recipes_as_configured() -> None:
    r = _recipes()
    tiny, calc, real, real_calc = r["tiny"], r["calc"], r["real"], r["real_calc"]
    assert tiny.sft.target_pass_at_1 is not None and calc.sft.target_pass_at_1 is not None
    assert real.sft.target_pass_at_1 is not None
    phrases = [
        f"SFTs it lightly on {tiny.sft.demos:,} verified demonstrations",
        f"stopping once held-out pass@1 reaches {tiny.sft.target_pass_at_1:g}",
        f"runs {tiny.rl.steps} GRPO steps with the {tiny.rl.preset.upper()} preset",
        f"stopped once sampled held-out pass@1 reaches {calc.sft.target_pass_at_1:g}",
        f"(DAPO preset, lr {_lr(calc.rl.lr)}, {calc.rl.steps} steps of {calc.rl.groups_per_step} groups × "
        f"{calc.rl.group_size}",
        f"{calc.eval.tasks} test tasks sampled at T = {calc.eval.temperature:g}",
        f"stopped at greedy held-out {real.sft.target_pass_at_1:g}",
        f"DAPO with {real.rl.groups_per_step} groups × {real.rl.group_size}",
        f"T = {real.eval.temperature:g} ({real.eval.tasks} tasks × {real.eval.samples} samples)",
        f"a fixed {real_calc.sft.max_steps}-step SFT, then DAPO {real_calc.rl.groups_per_step} × "
        f"{real_calc.rl.group_size} for {real_calc.rl.steps} steps",
        f"(T = {real_calc.eval.temperature:g}, {real_calc.eval.tasks} tasks)",
    ]
    text = _readme()
    assert [p for p in phrases if p not in text] == []


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, cmd


def _help(command: str, option: str) -> str:
    cmd = get_command(app).commands[command]  # type: ignore[attr-defined]
    return next(str(p.help) for p in cmd.params if p.name == option)


def test_quickstart_help_states_each_recipes_steps() -> None:
    r = _recipes()
    expected = (
        f"RL steps (default {r['tiny'].rl.steps}; {r['calc'].rl.steps} with --env calc; "
        f"{r['real'].rl.steps} with --model; {r['real_calc'].rl.steps} with --env calc --model)."
    )
    assert _help("quickstart", "steps") == expected


def test_every_stated_default_is_the_default() -> None:
    """Each ``(default N)`` in a ``--help``: the option's own default, or for ``verigym eval`` (whose
    flags are unset so a config file can fill them) the ``EvalConfig`` field's."""
    checked = 0
    for path, cmd in _commands(get_command(app)):
        for param in cmd.params:
            said = re.search(r"\(default (-?[0-9][0-9.]*)\)", str(getattr(param, "help", "") or ""))
            if said is None:
                continue
            value = param.default
            if value is None and path == ("eval",):
                value = EvalConfig.model_fields[param.name].default
            assert value is not None, f"{' '.join(path)} --{param.name}: no default to check its help against"
            assert float(said.group(1)) == float(value), (
                f"{' '.join(path)} --{param.name}: help says {said.group(1)}"
            )
            checked += 1
    assert checked >= 6  # eval's -n, -k, --concurrency, --temperature, --max-tokens, --seed at least
