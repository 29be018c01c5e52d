"""Old import paths that moved keep working until their stated removal version, with a
``DeprecationWarning`` naming the new path; verigym's own code never imports them."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import verigym

_FILTERS, _SHAPING = "verigym.train.group_filters", "verigym.train.shaping"
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
    stem = old.removeprefix("verigym.").replace(".", "/")
    users = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if old in p.read_text() and not str(p.relative_to(root)).startswith(stem)
    ]
    assert users == []
