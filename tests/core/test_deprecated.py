"""Old import paths that moved keep working until their stated removal version, with a
``DeprecationWarning`` naming the new path; they are listed in one place (``verigym._deprecated``),
have no files, and verigym's own code never imports them."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import verigym
from verigym._deprecated import ALIASES, Alias

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
_SANDBOX_NAMES = (
    "Limits",
    "Sandbox",
    "SandboxResult",
    "SandboxUnavailable",
    "kill_group",
    "python_executable",
    "random_uid",
    "run_sandboxed",
    "site_packages",
)
_SWE_NAMES = (
    "BENCH",
    "PROTECTED_PATTERNS",
    "TEST_PATTERNS",
    "PatchError",
    "SweResult",
    "apply_patch",
    "bench_verdict",
    "framework_refs",
    "grade_repo",
    "is_protected",
    "is_test_path",
    "swe_grader",
)


def _moved(new: str) -> dict[str, str]:
    """Every name of ``new``'s ``__all__``, held by ``new``."""
    return dict.fromkeys(importlib.import_module(new).__all__, new)


# old module -> (removal version, {name it still gives: the module that now holds it}); written out
# here, not read from the table, so that a changed table entry is a visible change to this test too
EXPECTED: dict[str, tuple[str, dict[str, str]]] = {
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
    "verigym.mcp_tools": ("0.3", dict.fromkeys(("MCPError", "MCPToolError", "MCPTools"), "verigym.tools")),
    "verigym.graders.sandbox": ("0.3", dict.fromkeys(_SANDBOX_NAMES, "verigym.graders.code.sandbox")),
    "verigym.graders.swe": ("0.3", dict.fromkeys(_SWE_NAMES, "verigym.graders.code.swe")),
}
_ROOT = Path(verigym.__file__).parent


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_table_is_the_expected_one() -> None:
    assert sorted(a.old for a in ALIASES) == sorted(EXPECTED)
    assert len({a.old for a in ALIASES}) == len(ALIASES)
    for alias in ALIASES:
        assert alias.removal == EXPECTED[alias.old][0]
        assert sorted(alias.modules) == sorted(set(EXPECTED[alias.old][1].values()))


@pytest.mark.parametrize("old", sorted(EXPECTED))
def test_old_path_warns_and_gives_the_same_objects(old: str) -> None:
    version, names = EXPECTED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning) as caught:
        module = importlib.import_module(old)
    message = str(caught[0].message)
    assert f"verigym {version}" in message and f"verigym {version}" in (module.__doc__ or "")
    for name, new in names.items():
        assert new in message
        assert getattr(module, name) is getattr(importlib.import_module(new), name)
    assert sorted(module.__all__) == sorted(names)


def test_an_old_module_path_gives_the_new_modules_other_attributes_too() -> None:
    import verigym.graders

    sys.modules.pop("verigym.graders.swe", None)
    vars(verigym.graders).pop("swe", None)  # set on the package by an earlier import of the old path
    with pytest.warns(DeprecationWarning) as caught:
        from verigym.graders import swe  # the `from package import module` form
    assert caught[0].filename == __file__  # the warning points at the importing line
    import verigym.graders.code.swe as new

    assert swe.__name__ == "verigym.graders.swe" and swe._matches is new._matches  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        swe.no_such_name  # noqa: B018


def test_old_paths_import_in_a_fresh_process_and_star_import() -> None:
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n    import verigym.train.sampling\nexcept DeprecationWarning as e:\n    print('warned:', e)\n"
        "warnings.simplefilter('ignore')\n"
        "from verigym.policies.lora import *\nprint(sorted(n for n in dir() if not n.startswith('_')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("warned: verigym.train.sampling is deprecated and goes in verigym 0.3")
    assert "AdapterMixin" in lines[1] and "base_model" in lines[1]


@pytest.mark.parametrize("alias", ALIASES, ids=lambda a: a.old)
def test_an_old_path_has_no_file_and_outlives_no_removal(alias: Alias) -> None:
    """Removing an alias in its version is deleting its table line: the old path has no file, and
    the table holds nothing the package's version should have removed."""
    relative = Path(*alias.old.split(".")[1:])
    assert not (_ROOT / relative.with_suffix(".py")).exists() and not (_ROOT / relative).exists()
    assert _version(verigym.__version__) < _version(alias.removal), alias
    assert _version(alias.since) <= _version(verigym.__version__)


@pytest.mark.parametrize("old", sorted(EXPECTED))
def test_verigym_never_imports_an_old_path(old: str) -> None:
    users = []
    for path in _ROOT.rglob("*.py"):
        if path.name == "_deprecated.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value.partition(":")[0]]  # "module" or "module:attr" targets
            if old in names:
                users.append(f"{path.relative_to(_ROOT)}:{node.lineno}")
    assert users == []


def test_the_new_paths_import_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for alias in ALIASES:
            for module in alias.modules:
                importlib.import_module(module)


def test_the_engine_package_keeps_the_old_local_module_names() -> None:
    """``verigym.policies.local`` was one module; as the engine package it exports the same names."""
    import verigym.policies.local as local
    from verigym.policies.local import _engine, _score, policy

    assert {"EarlyStop", "LocalPolicy", "RowResult", "RowSpec", "Scored"} <= set(local.__all__)
    assert local.LocalPolicy is policy.LocalPolicy and local.RowSpec is _engine.RowSpec
    assert local.RowResult is _engine.RowResult and local.EarlyStop is _engine.EarlyStop
    assert local.Scored is _score.Scored
