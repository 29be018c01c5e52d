"""``tests/`` mirrors ``src/verigym/``: a folder of tests is named for the package it tests (nested
ones too: ``tests/envs/builtin``, ``tests/graders/code``, ``tests/policies/local``), each built-in
environment has ``tests/envs/builtin/test_<module>.py``, and the few folders that test across
packages or hold data are listed here with why."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC, TESTS = ROOT / "src" / "verigym", ROOT / "tests"

ACROSS: dict[str, str] = {
    "core": "the foundation (types, rubric, registry, run files) and the architecture's own checks",
    "hardening": "hostile inputs, faults and resource limits across eval, train, serve and the wire",
    "agentic": "agentic features that span envs, graders and tools (MCP, penalties, judges, repo_fix)",
    "fixtures": "data the tests read (model-free datasets, plugin package, golden logs)",
    "suites": "the graders' labeled suites (verigym verifier-bench)",
}


def _folders(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("*")) if p.is_dir() and "__pycache__" not in p.parts]


def test_every_test_folder_is_a_package_of_src_or_listed() -> None:
    strays = []
    for folder in _folders(TESTS):
        parts = folder.relative_to(TESTS).parts
        if parts[0] in ACROSS:
            continue
        if not (SRC.joinpath(*parts).is_dir() or SRC.joinpath(*parts[:-1], f"{parts[-1]}.py").is_file()):
            strays.append("/".join(parts))
    assert strays == [], f"tests/ folders with no src/verigym package of that name: {strays}"
    assert all((TESTS / name).is_dir() for name in ACROSS), "a listed folder is gone: drop its line"


def test_every_built_in_environment_has_its_test_file() -> None:
    modules = sorted(p.stem for p in (SRC / "envs" / "builtin").glob("[!_]*.py"))
    assert len(modules) >= 15
    missing = [m for m in modules if not (TESTS / "envs" / "builtin" / f"test_{m}.py").is_file()]
    assert missing == [], f"built-in environments without tests/envs/builtin/test_<module>.py: {missing}"


def test_test_module_names_are_unique() -> None:
    """pytest imports test modules by their file name (no ``__init__.py`` under ``tests/``), so two
    files of one name in different folders would collide."""
    names = Counter(
        p.name for p in TESTS.rglob("*.py") if "fixtures" not in p.parts and p.name != "conftest.py"
    )
    assert [name for name, n in names.items() if n > 1] == []
