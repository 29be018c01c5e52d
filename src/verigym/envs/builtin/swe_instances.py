"""The ``swe_instances`` environment: SWE-bench-format instances over local repository directories.

**Task.** One instance of a SWE-bench-format file (Jimenez et al. 2024, "SWE-bench: Can Language
Models Resolve Real-World GitHub Issues?"): a JSON array or JSON Lines of objects with
``instance_id``, ``problem_statement``, ``FAIL_TO_PASS``, ``PASS_TO_PASS`` (lists, or JSON
strings of lists as in the released dataset), ``test_patch`` and, for the oracle, ``patch``.
Instead of a clone at ``base_commit``, each instance names a local directory holding the
repository as it is before the fix: the row's ``repo_dir`` (relative to the file), else
``repos=DIR`` / ``<instance_id>``. No network is used.

**Harness.** Single turn: the issue and the repository's non-test files (up to
``max_prompt_chars``; past that only their paths) are shown; the model answers with a unified
diff in a ```` ```diff ```` block.

**Grader** (``graders.code.swe``): the diff is applied to the repository; every protected file
(tests, ``conftest.py``, test/CI configuration) is reset, test files the candidate added are
removed, and the files ``test_patch`` touches are written over them (the hidden tests: tamper
detection, SWE-bench style); then FAIL_TO_PASS and PASS_TO_PASS run under pytest. Resolved = all
pass (weight 1). Gated on it, ``patch`` (weight 0.1, from repo_fix's SWE grader stack): the diff
applies cleanly, touches no protected file and is well formed. ``runtime=bubblewrap`` (default) runs them in verigym's sandbox; ``runtime=docker`` in a
container of ``image=`` (or the row's ``image``) with no network, after checking that a Docker
engine answers (a one-line error otherwise). A sandbox or engine that cannot run is a grader
error, never a 0.

The oracle answers the gold ``patch``; the null policy answers without a diff.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verigym._files import read_jsonl
from verigym.envs._args import choice_arg, int_arg
from verigym.envs.base import SingleTurnEnv
from verigym.envs.builtin._repo_fix_graders import patch_grader
from verigym.envs.builtin._swe_docker import docker_status, grade_in_docker
from verigym.envs.datasets import DatasetError
from verigym.envs.procedural import HandsOutTasks
from verigym.envs.registry import EnvArgError
from verigym.graders.code.swe import PatchError, apply_patch, is_test_path, swe_grader
from verigym.policies.base import Policy
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Message, Task, Trajectory

__all__ = ["SweInstancesEnv", "load_instances", "read_repo"]

_SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".tox", ".venv", "node_modules"}
_MAX_FILE_BYTES = 1_000_000
_DIFF_BLOCK = "```diff"
_DIFF = re.compile(r"```(?:diff|patch)[^\n]*\n(.*?)```", re.S)
PROMPT = (
    "Resolve the issue below in the repository shown. Answer with a unified diff (as `git diff` "
    "prints it) in one ```diff block; the hidden tests decide whether the issue is resolved.\n\n"
    "## Issue\n{issue}\n\n## Repository ({n} files)\n{files}"
)


def read_repo(root: Path) -> dict[str, str]:
    """Every text file under ``root`` (path → text), skipping VCS/cache folders and binaries."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or any(part in _SKIP_DIRS for part in rel.parts):
            continue
        if path.stat().st_size > _MAX_FILE_BYTES:
            continue
        try:
            out[rel.as_posix()] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    return out


def _id_list(value: Any, where: str, field: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise DatasetError(f"{where}: field {field!r} must be a list of test ids (or its JSON)") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DatasetError(f"{where}: field {field!r} must be a list of test ids")
    return list(value)


def _rows(path: Path) -> list[tuple[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            return [(f"{path}[{i}]", r) for i, r in enumerate(json.loads(text))]
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    return list(read_jsonl(path, error=DatasetError))


def _files_block(files: Mapping[str, str], budget: int) -> str:
    shown = {p: t for p, t in files.items() if not is_test_path(p)}
    parts, used = [], 0
    for p, t in shown.items():
        block = f"### {p}\n```\n{t}\n```\n"
        if used + len(block) > budget:
            parts.append(f"### {p} (not shown: prompt budget)\n")
            continue
        parts.append(block)
        used += len(block)
    return "".join(parts)


def load_instances(
    path: str | Path, repos: str | Path | None = None, max_prompt_chars: int = 60_000
) -> list[Task]:
    """Tasks from a SWE-bench-format file with local repository directories (module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"{p}: no such file")
    tasks = []
    for where, row in _rows(p):
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: expected an object, got {type(row).__name__}")
        for field in ("instance_id", "problem_statement", "FAIL_TO_PASS", "test_patch"):
            if field not in row:
                raise DatasetError(f"{where}: missing field {field!r} (row has: {', '.join(map(str, row))})")
        iid = str(row["instance_id"])
        if "repo_dir" in row:
            repo = p.parent / str(row["repo_dir"])
        elif repos is not None:
            repo = Path(repos) / iid
        else:
            raise DatasetError(f"{where}: no field 'repo_dir' and no repos=DIR for instance {iid!r}")
        if not repo.is_dir():
            raise DatasetError(f"{where}: repository directory {repo} does not exist")
        before = read_repo(repo)
        try:
            after_tests = apply_patch(before, str(row["test_patch"]))
        except PatchError as exc:
            raise DatasetError(f"{where}: test_patch does not apply to {repo}: {exc}") from None
        hidden = {k: v for k, v in after_tests.items() if before.get(k) != v}
        info: dict[str, Any] = {
            "repo_files": before,
            "hidden_tests": hidden,
            "fail_to_pass": _id_list(row["FAIL_TO_PASS"], where, "FAIL_TO_PASS"),
            "pass_to_pass": _id_list(row.get("PASS_TO_PASS", []), where, "PASS_TO_PASS"),
        }
        if "image" in row:
            info["image"] = str(row["image"])
        files = _files_block(before, max_prompt_chars)
        n = sum(not is_test_path(k) for k in before)
        prompt = PROMPT.format(issue=str(row["problem_statement"]).strip(), n=n, files=files)
        gold = row.get("patch")
        tasks.append(Task(id=iid, prompt=(Message(role="user", content=prompt),),
                          answer=None if gold is None else f"{_DIFF_BLOCK}\n{gold}```", info=info))  # fmt: skip
    return tasks


def _docker_grader(image: str | None, timeout_s: float) -> Grader:
    def grade(task: Task, trajectory: Trajectory) -> Grade:
        info = task.info
        blocks = _DIFF.findall(trajectory.final_text)  # the last block, as the bubblewrap path reads it
        if not blocks:
            return Grade(score=0.0, detail="no patch (```diff block)")
        try:
            after = apply_patch(info["repo_files"], blocks[-1])
        except PatchError as exc:
            return Grade(score=0.0, detail=f"the patch does not apply: {exc}")
        chosen = info.get("image", image)
        if not chosen:
            raise ValueError(f"task {task.id!r}: runtime=docker needs image= (or an 'image' field)")
        result = grade_in_docker(chosen, info["repo_files"], after, info["hidden_tests"],
                                 info["fail_to_pass"], info["pass_to_pass"], timeout_s=timeout_s)  # fmt: skip
        if result.error is not None:
            raise RuntimeError(result.error)
        return Grade(score=float(result.resolved), detail=result.detail())

    return Grader(grade, name="resolved", timeout=None)


class SweInstancesEnv(HandsOutTasks, SingleTurnEnv):
    """SWE-bench-format instances with local repositories; a diff graded by FAIL_TO_PASS/PASS_TO_PASS."""

    name = "swe_instances"
    description = "SWE-bench-format instances over local repo dirs (path=); diff graded by hidden tests."
    public_info_keys = ("repo_files",)

    def __init__(
        self,
        path: str | None = None,
        repos: str | None = None,
        runtime: str = "bubblewrap",
        image: str | None = None,
        timeout_s: int = 120,
        max_prompt_chars: int = 60_000,
        system_prompt: str | None = None,
    ) -> None:
        if path is None:
            raise EnvArgError(
                "swe_instances: give --env-arg path=INSTANCES.json (SWE-bench format, local repos)"
            )
        self._path = Path(path)
        if not self._path.is_file():
            raise EnvArgError(f"swe_instances: path {path!r} is not a file")
        self._repos = repos
        self.runtime = choice_arg("swe_instances", "runtime", runtime, ("bubblewrap", "docker"))
        self.timeout_s = int_arg("swe_instances", "timeout_s", timeout_s, 1, 3600)
        self.max_prompt_chars = int_arg("swe_instances", "max_prompt_chars", max_prompt_chars, 0, 10**8)
        if self.runtime == "docker":
            why = docker_status()
            if why is not None:
                raise EnvArgError(f"swe_instances: runtime=docker but {why}; use runtime=bubblewrap")
            grader = _docker_grader(image, float(self.timeout_s))
        else:
            grader = swe_grader(name="resolved", timeout_s=float(self.timeout_s))
        patch = patch_grader()  # the diff applies cleanly, touches no protected file, is well formed
        rubric = Rubric([grader, patch], gates={patch.name: [grader.name]})
        super().__init__(rubric=rubric, system_prompt=system_prompt)
        self._tasks: list[Task] | None = None

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        if split != "test":
            raise ValueError(f"swe_instances has only a test split, not {split!r}")
        if self._tasks is None:
            self._tasks = load_instances(self._path, self._repos, self.max_prompt_chars)
        out = self._tasks if n is None else self._tasks[:n]
        return self.hand_out(out)

    def oracle_policy(self) -> Policy | None:
        """Answers the gold ``patch`` (None when an instance has none)."""
        tasks = self.tasks()
        if not tasks or any(t.answer is None for t in tasks):
            return None
        return self.task_oracle(lambda task, messages: task.answer or "", name="swe-oracle")

    def null_policy(self) -> Policy:
        return ScriptedPolicy(lambda messages: "I could not find the bug.", name="swe-null")
