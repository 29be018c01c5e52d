"""Run files are written atomically, through ``verigym._files`` (issue 42 item 3).

A run's files (configs, summaries, reports, checkpoint pointers, metrics rewritten on resume) used to
be opened with truncation and written in place: a kill in between left them empty. Now every one
goes through ``write_atomic`` / ``write_json`` / ``open_atomic`` (a temporary file in the same
folder, then ``os.replace``). This test reads the source: any other in-place write outside the
allow-list below fails it. Appends (``results.jsonl``, ``metrics.jsonl``: append, flush) are fine.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from verigym._files import open_atomic, write_atomic, write_json

SRC = Path(__file__).resolve().parents[2] / "src" / "verigym"

# module (relative to src/verigym) -> why its in-place writes are not run files
ALLOWED = {
    "graders/code/_worker.py": "the sandboxed child's own stdout/stderr and scratch files",
    "graders/code/_sandbox_io.py": "scratch files inside a throwaway sandbox folder",
    "graders/code/_cgroup.py": "cgroup control files (kernel interfaces, not files)",
    "graders/math/_sympy_path/_worker.py": "the worker's duplicated stdout",
    "tools/_mcp.py": "os.devnull as an MCP server's stderr",
    "envs/builtin/_swe_docker.py": "files of a throwaway repository checkout for a test run",
    "_cli/collection_cmd.py": "`verigym init` scaffolding a new package (not a run)",
    "policies/tiny.py": "a fresh model folder being created by tiny.create",
    "policies/catalogue.py": "a download's work folder, renamed into place when complete",
    # one function of a module: the append protocol's own repair of results.jsonl
    "eval/store.py::_repair_tail": "cuts a torn last line (one truncate) before appending",
}

_WRITE_MODES = ("w", "x", "+")


def _mode(call: ast.Call, position: int) -> str | None:
    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    arg = call.args[position] if len(call.args) > position else None
    return str(arg.value) if isinstance(arg, ast.Constant) else None


def in_place_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, what)`` of every call that writes a file in place."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        if name in ("write_text", "write_bytes"):
            found.append((node.lineno, name))
        elif name in ("open", "fdopen"):
            # builtin open(path, mode) / os.fdopen(fd, mode): mode 2nd; Path.open(mode): 1st
            method = isinstance(fn, ast.Attribute) and not (
                isinstance(fn.value, ast.Name) and fn.value.id in ("os", "io", "builtins")
            )
            mode = _mode(node, 0 if method else 1)
            if mode is not None and any(m in mode for m in _WRITE_MODES):
                found.append((node.lineno, f"{name}(..., {mode!r})"))
            if name == "open" and isinstance(fn, ast.Attribute) and getattr(fn.value, "id", "") == "os":
                flags = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
                if "O_TRUNC" in flags:
                    found.append((node.lineno, "os.open(..., O_TRUNC)"))
    return found


def _functions(tree: ast.AST) -> dict[int, str]:
    """The name of the innermost function around each line."""
    where: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                where[line] = node.name  # ast.walk is breadth-first: inner functions come later
    return where


def test_every_run_file_is_written_through_the_atomic_helper() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = _functions(tree)
        for line, what in in_place_writes(tree):
            if f"{rel}::{functions.get(line)}" not in ALLOWED:
                offenders.append(f"src/verigym/{rel}:{line}: {what}")
    assert not offenders, "in-place writes (use verigym._files.write_atomic/open_atomic):\n" + "\n".join(
        offenders
    )


def test_the_allow_list_names_files_that_exist_and_still_need_it() -> None:
    for entry in ALLOWED:
        rel, _, function = entry.partition("::")
        path = SRC / rel
        assert path.is_file(), rel
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = _functions(tree)
        lines = [line for line, _ in in_place_writes(tree) if not function or functions.get(line) == function]
        assert lines, f"{entry} no longer needs it"


@pytest.mark.parametrize(
    "source",
    [
        'Path("x").write_text("a")',
        'p.write_bytes(b"a")',
        'open(p, "w")',
        'open(p, mode="wb")',
        'p.open("w", encoding="utf-8")',
        'os.fdopen(fd, "w")',
        "os.open(p, os.O_WRONLY | os.O_TRUNC)",
        'open(p, "r+")',
    ],
)
def test_the_check_sees_each_kind_of_in_place_write(source: str) -> None:
    assert in_place_writes(ast.parse(source))


@pytest.mark.parametrize(
    "source", ['open(p, "a")', 'p.open("a", encoding="utf-8")', 'open(p, "rb")', "p.read_text()"]
)
def test_appends_and_reads_are_allowed(source: str) -> None:
    assert not in_place_writes(ast.parse(source))


def test_write_atomic_replaces_and_leaves_unchanged_content_alone(tmp_path: Path) -> None:
    path = tmp_path / "train_config.json"
    assert write_atomic(path, "one\n")
    inode = path.stat().st_ino
    assert not write_atomic(path, "one\n")  # the same content: not rewritten, same file
    assert path.stat().st_ino == inode
    link = tmp_path / "linked"
    os.link(path, link)
    assert write_atomic(path, "two\n")  # a new file: a hard-linked copy keeps the old content
    assert path.read_text() == "two\n" and link.read_text() == "one\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["linked", "train_config.json"]  # no temp left


def test_open_atomic_keeps_the_old_file_when_the_writer_fails(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"old\n")
    with pytest.raises(RuntimeError), open_atomic(path) as fh:
        fh.write("half")
        raise RuntimeError("killed")
    assert path.read_bytes() == b"old\n" and [p.name for p in tmp_path.iterdir()] == ["results.jsonl"]


def test_write_json_is_always_json(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    write_json(path, {"reward_mean": float("inf"), "ci": [float("nan"), 1.0], "n": 2})
    data = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert data["reward_mean"] is None and data["ci"] == [None, 1.0]
    assert data["non_finite"] == {"reward_mean": "inf", "ci[0]": "nan"}
