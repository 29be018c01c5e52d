"""Preset names are data (``train.config.PRESETS``); every place that lists them for a reader says the
same names (issue 25 item 3): ``verigym train --preset``'s help (made from them by
``train.presets.preset_help``), the ``train`` package map and the config module's preset notes."""

from __future__ import annotations

import re

import typer
from typer.main import get_command

import verigym.train
import verigym.train.config as config
from verigym.cli import app
from verigym.train.config import PRESETS
from verigym.train.presets import preset_help


def _named(text: str) -> set[str]:
    """Preset names that occur in ``text`` as whole words (``grpo`` inside ``dr_grpo`` does not count)."""
    return {name for name in PRESETS if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)}


def _preset_help() -> str:
    train = get_command(app).commands["train"]  # type: ignore[attr-defined]
    return next(str(p.help) for p in train.params if "--preset" in getattr(p, "opts", ()))


def test_every_preset_is_in_the_cli_help() -> None:
    assert isinstance(app, typer.Typer)
    assert _named(_preset_help()) == set(PRESETS)
    assert _preset_help() == preset_help()  # made from the data, not written by hand


def test_every_preset_is_in_the_package_map_and_the_config_notes() -> None:
    assert _named(verigym.train.__doc__ or "") == set(PRESETS)
    notes = (config.__doc__ or "").split("Presets", 1)[1]
    assert {n for n in PRESETS if f"``{n}``" in notes} == set(PRESETS)


def test_the_readme_lists_every_preset() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    listed = readme.split("Presets: ", 1)[1].split(". Each step", 1)[0]
    assert {name for name in PRESETS if f"`{name}`" in listed} == set(PRESETS)
