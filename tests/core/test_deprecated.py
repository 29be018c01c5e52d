"""Old import paths that moved keep working until their stated removal version, with a
``DeprecationWarning`` naming the new path; verigym's own code never imports them."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

import verigym

_FILTERS, _SHAPING = "verigym.train.group_filters", "verigym.train.shaping"
_CHAT, _LORA = "verigym.policies.local.chat", "verigym.policies.local.lora"
_CHAT_NAMES = (
    "TOOL_FORMATS",
    "Parsed",
    "TemplateTraits",
    "ToolFormat",
    "call_parts",
    "default_format",
    "encode_chat",
    "get_format",
    "parse_tool_calls",
    "render_chat",
    "special_texts",
    "strip_markers",
    "template_traits",
    "visible_prefix",
)


def _moved(new: str) -> dict[str, str]:
    """Every name of ``new``'s ``__all__``, held by ``new``."""
    return dict.fromkeys(importlib.import_module(new).__all__, new)


# old module -> (removal version, {name it still gives: the module that now holds it})
SHIMS: dict[str, tuple[str, dict[str, str]]] = {
    "verigym.train.sampling": (
        "0.3",
        {
            "DifficultyTracker": _FILTERS,
            "has_signal": _FILTERS,
            "lead_length_rewards": _SHAPING,
            "soft_overlong": _SHAPING,
            "token_cost": _SHAPING,
        },
    ),
    "verigym.policies.chat": ("0.3", dict.fromkeys(_CHAT_NAMES, _CHAT)),
    "verigym.policies.lora": ("0.3", dict.fromkeys(("AS_IS", "AdapterMixin", "base_model"), _LORA)),
    "verigym.envs.extras": ("0.3", _moved("verigym.envs.prepare")),
}


@pytest.mark.parametrize("old", sorted(SHIMS))
def test_old_path_warns_and_gives_the_same_objects(old: str) -> None:
    version, names = SHIMS[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning) as caught:
        module = importlib.import_module(old)
    message = str(caught[0].message)
    assert f"verigym {version}" in message and f"verigym {version}" in (module.__doc__ or "")
    for name, new in names.items():
        assert new in message
        assert getattr(module, name) is getattr(importlib.import_module(new), name)
    assert sorted(module.__all__) == sorted(names)


@pytest.mark.parametrize("old", sorted(SHIMS))
def test_verigym_never_imports_an_old_path(old: str) -> None:
    root = Path(verigym.__file__).parent
    users = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = [a.name for a in node.names]
            if isinstance(node, ast.ImportFrom):
                names = [node.module or "", *(f"{node.module}.{n}" for n in names)]
            if old in names:
                users.append(f"{path.relative_to(root)}:{node.lineno}")
    assert users == []


def test_the_engine_package_keeps_the_old_local_module_names() -> None:
    """``verigym.policies.local`` was one module; as the engine package it exports the same names."""
    import verigym.policies.local as local
    from verigym.policies.local import _engine, _score, policy

    assert sorted(local.__all__) == ["EarlyStop", "LocalPolicy", "RowResult", "RowSpec", "Scored"]
    assert local.LocalPolicy is policy.LocalPolicy and local.RowSpec is _engine.RowSpec
    assert local.RowResult is _engine.RowResult and local.EarlyStop is _engine.EarlyStop
    assert local.Scored is _score.Scored
