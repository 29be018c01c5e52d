"""The SWE grader stack of ``repo_fix``: patch, rollout, behaviour, user-experience and task graders.

The stack follows the coding-agent graders of the agent-training lecture (Weizhu Chen, "Challenges
and Lessons from Training Agentic Models", 2025): a unit-test grader (the hard requirement, the
SWE grader of ``verigym.graders.code.swe``) and, as separate named graders,

- ``patch``: the final change as a unified diff applies cleanly to the original tree, touches no
  protected file (tests, conftest, test/CI config), changes something, and is in good form: every
  changed Python file parses, ends with a newline, adds no trailing whitespace or tab indentation,
  creates no file outside ``task.info["allowed_new_files"]`` (when the task lists them), and stays
  within a line budget (3x the reference fix ``task.info["fixed"]``, at least 12 lines, when known);
  it reads the final files (``trajectory.state["files"]``) or the last ```` ```diff ```` block of
  the answer (single-turn SWE instances);
- ``rollout``: tools used accurately: at least one call, every call names a known tool with
  well-formed arguments, no call fails (a tool answer starting ``Error:``), and no redundant
  repetition (the same call with the same arguments again with no edit in between);
- ``behaviour``: the visible tests ran after the last code edit and passed, and the episode ends with a
  summary (a final message without tool calls, at least 6 words, naming a changed file or function);
- ``user_experience``: the user's step-by-step instructions were followed in order (tests run
  before the first code edit, the changelog written after the last code edit) and progress was
  reported (at least half the tool-calling turns carry a short note of what the agent is doing);
- ``task_specific``: the repository set-up the task asks for: each ``task.info["file_checks"]``
  entry ``{"path", "pattern"}`` holds in the final files (for ``repo_fix``: a changelog entry
  under ``## Unreleased`` naming the fixed function).

Every grader reads the trajectory: assistant tool calls paired with their tool answers by id,
with the names of a tool variant mapped back to the original tools. Each scores 1.0 or 0.0 with
the reasons in ``detail``. Labeled suite: ``tests/suites/repo_fix_graders.jsonl``.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verigym.graders.code.patch import PatchError, apply_patch, changed_paths
from verigym.graders.code.swe import is_protected
from verigym.rubric import Grader
from verigym.types import Grade, Task, ToolCall, Trajectory

__all__ = [
    "GRADERS",
    "Call",
    "behaviour_grader",
    "episode_calls",
    "fixed_function",
    "patch_grader",
    "rollout_grader",
    "task_specific_grader",
    "unified_diff",
    "user_experience_grader",
]

VariantOf = Callable[[], Any]  # returns the env's ToolVariant (or None): maps renamed calls back
_DIFF = re.compile(r"```(?:diff|patch)[^\n]*\n(.*?)```", re.S)
WRITE_TOOL = "write_file"
TEST_TOOL = "run_tests"
CHANGELOG = "CHANGELOG.md"


@dataclass(frozen=True)
class Call:
    """One tool call of the episode (original tool names) and what the tool answered."""

    turn: int  # index of the assistant message among the assistant messages
    call: ToolCall
    result: str | None  # None: no tool answer was recorded
    note: str  # the text the assistant wrote in the same message

    @property
    def failed(self) -> bool:
        return self.result is None or self.result.lstrip().startswith("Error")

    def arg(self, key: str) -> str:
        try:
            value = self.call.parsed_arguments().get(key)
        except ValueError:
            return ""
        return value if isinstance(value, str) else ""


def episode_calls(trajectory: Trajectory, variant: Any = None) -> list[Call]:
    """The tool calls of an episode in order, each with its tool answer."""
    answers = {m.tool_call_id: m.content for m in trajectory.messages if m.role == "tool"}
    out: list[Call] = []
    turn = -1
    for msg in trajectory.messages[len(trajectory.prompt) :]:
        if msg.role != "assistant":
            continue
        turn += 1
        for call in msg.tool_calls:
            original = variant.to_original(call) if variant is not None else call
            out.append(Call(turn, original, answers.get(call.id), msg.content))
    return out


def _final_message(trajectory: Trajectory) -> str | None:
    """The last assistant message when it asks for no tool call (the episode's closing words)."""
    for msg in reversed(trajectory.messages):
        if msg.role == "assistant":
            return None if msg.tool_calls else msg.content
    return None


def unified_diff(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """A unified diff (``a/`` and ``b/`` prefixes) turning ``before`` into ``after``."""
    parts: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        lines = difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            (new or "").splitlines(keepends=True),
            "/dev/null" if old is None else f"a/{path}",
            "/dev/null" if new is None else f"b/{path}",
        )
        for line in lines:
            parts.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(parts)


def _final_tree(task: Task, trajectory: Trajectory) -> tuple[dict[str, str], dict[str, str] | None, str]:
    """(files before, files after or None when the patch fails, the patch text or the failure)."""
    before = {str(k): str(v) for k, v in (task.info.get("repo_files") or {}).items()}
    files = trajectory.state.get("files")
    if isinstance(files, dict):
        after = {str(k): str(v) for k, v in files.items()}
        return before, after, unified_diff(before, after)
    blocks = _DIFF.findall(trajectory.final_text)
    if not blocks:
        return before, before, ""
    try:
        return before, apply_patch(before, blocks[-1]), blocks[-1]
    except PatchError as exc:
        return before, None, f"the patch does not apply: {exc}"


def _changed_lines(before: Mapping[str, str], after: Mapping[str, str], paths: Sequence[str]) -> int:
    n = 0
    for p in paths:
        diff = difflib.unified_diff(before.get(p, "").splitlines(), after.get(p, "").splitlines(), n=0)
        n += sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))
    return n


def _grade(problems: Sequence[str], ok: str) -> Grade:
    if problems:
        return Grade(score=0.0, detail="; ".join(problems)[:600])
    return Grade(score=1.0, detail=ok)


def grade_patch(task: Task, trajectory: Trajectory) -> Grade:
    before, after, patch = _final_tree(task, trajectory)
    if after is None:
        return Grade(score=0.0, detail=patch[:600])
    if not patch:
        return Grade(score=0.0, detail="no change to the repository")
    try:  # the final change as a diff must apply cleanly to the original tree
        if apply_patch(before, patch) != after:
            return Grade(score=0.0, detail="the diff does not reproduce the final files")
    except PatchError as exc:
        return Grade(score=0.0, detail=f"the diff does not apply cleanly: {exc}")
    added, modified, deleted = changed_paths(before, after)
    changed = added + modified + deleted
    problems = [f"touches protected file {p}" for p in changed if is_protected(p)]
    allowed = task.info.get("allowed_new_files")  # None: any new (unprotected) file is fine
    if allowed is not None:
        problems += [f"adds unexpected file {p}" for p in added if p not in set(allowed)]
    for p in modified + added:
        old = set(before.get(p, "").splitlines())
        new_lines = [line for line in after[p].splitlines() if line not in old]
        if p.endswith(".py"):
            try:
                ast.parse(after[p])
            except SyntaxError as exc:
                problems.append(f"{p} does not parse (line {exc.lineno})")
            if any(re.match(r"^ *\t", line) for line in new_lines):
                problems.append(f"{p}: tab indentation")
        if after[p] and not after[p].endswith("\n"):
            problems.append(f"{p}: no newline at end of file")
        if any(line != line.rstrip() for line in new_lines):
            problems.append(f"{p}: trailing whitespace")
    fixed: Mapping[str, str] = task.info.get("fixed") or {}
    if fixed:
        code = [p for p in changed if p.endswith(".py")]
        budget = max(12, 3 * _changed_lines(before, fixed, list(fixed)))
        size = _changed_lines(before, after, code)
        if size > budget:
            problems.append(f"the patch changes {size} code lines (budget {budget}: keep the fix small)")
    return _grade(problems, f"clean patch over {len(changed)} file(s)")


def _rollout(task: Task, trajectory: Trajectory, variant: Any) -> Grade:
    calls = episode_calls(trajectory, variant)
    if not calls:
        return Grade(score=0.0, detail="no tool calls")
    problems = [f"{c.call.name}: {(c.result or 'no answer').strip()[:80]}" for c in calls if c.failed]
    seen: set[tuple[str, str]] = set()
    for c in calls:
        if c.call.name == WRITE_TOOL and not c.failed:
            seen.clear()  # an edit makes reading and testing again worthwhile
            continue
        key = (c.call.name, _canonical_args(c.call))
        if key in seen:
            problems.append(f"redundant repeat of {c.call.name}({c.call.arguments[:60]})")
        seen.add(key)
    return _grade(problems, f"{len(calls)} well-formed, successful, non-redundant calls")


def _canonical_args(call: ToolCall) -> str:
    try:
        return repr(sorted(call.parsed_arguments().items()))
    except ValueError:
        return call.arguments


def _test_outcome(result: str | None) -> tuple[int, int] | None:
    m = re.match(r"\s*(\d+) passed, (\d+) failed", result or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def _code_edits(calls: Sequence[Call]) -> list[int]:
    return [
        i
        for i, c in enumerate(calls)
        if c.call.name == WRITE_TOOL and not c.failed and c.arg("path").endswith(".py")
    ]


def _behaviour(task: Task, trajectory: Trajectory, variant: Any) -> Grade:
    calls = episode_calls(trajectory, variant)
    edits = _code_edits(calls)
    problems: list[str] = []
    if not edits:
        problems.append("no code edit was made")
    else:
        runs = [c for c in calls[edits[-1] + 1 :] if c.call.name == TEST_TOOL]
        outcomes = [_test_outcome(c.result) for c in runs]
        if not runs:
            problems.append("the tests were not run after the last edit")
        elif not any(o is not None and o[0] > 0 and o[1] == 0 for o in outcomes):
            problems.append("the tests run after the last edit did not pass")
    final = _final_message(trajectory)
    if final is None or not final.strip():
        problems.append("no final summary")
    else:
        _, after, _ = _final_tree(task, trajectory)
        before = task.info.get("repo_files") or {}
        names = _changed_names(before, after or {})
        if len(final.split()) < 6:
            problems.append("the final summary is under 6 words")
        elif names and not any(n in final for n in names):
            problems.append(f"the final summary names none of the changes ({', '.join(sorted(names)[:4])})")
    return _grade(problems, "tested after the last edit and summarised")


def _changed_names(before: Mapping[str, str], after: Mapping[str, str]) -> set[str]:
    """Changed code paths (any changed path when no code changed), their file names, module stems,
    and the functions whose source changed."""
    names: set[str] = set()
    changed = [p for p in set(before) | set(after) if before.get(p) != after.get(p)]
    code = [p for p in changed if p.endswith(".py")]
    for p in code or changed:  # the code change when there is one (not just the changelog)
        base = p.rsplit("/", 1)[-1]
        names |= {p, base, base.rsplit(".", 1)[0]}
        if p.endswith(".py"):
            names |= _changed_functions(before.get(p, ""), after.get(p, ""))
    return {n for n in names if len(n) > 2 and n != "__init__"}


def _changed_functions(old: str, new: str) -> set[str]:
    def bodies(src: str) -> dict[str, str]:
        try:
            tree = ast.parse(src)
        except SyntaxError:
            return {}
        return {n.name: ast.dump(n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}

    a, b = bodies(old), bodies(new)
    return {name for name in set(a) | set(b) if a.get(name) != b.get(name)}


def _user_experience(task: Task, trajectory: Trajectory, variant: Any) -> Grade:
    calls = episode_calls(trajectory, variant)
    problems: list[str] = []
    edits = _code_edits(calls)
    tests = [i for i, c in enumerate(calls) if c.call.name == TEST_TOOL]
    logs = [
        i
        for i, c in enumerate(calls)
        if c.call.name == WRITE_TOOL and not c.failed and c.arg("path") == CHANGELOG
    ]
    if edits and (not tests or tests[0] > edits[0]):
        problems.append("step 1 skipped: the tests were not run before the first code edit")
    if logs and edits and logs[-1] < edits[-1]:
        problems.append("step 4 out of order: the changelog was written before the last code edit")
    turns = sorted({c.turn for c in calls})
    noted = {c.turn for c in calls if len(c.note.split()) >= 3}
    if not turns or len(noted) * 2 < len(turns):
        problems.append(f"progress reported in {len(noted)} of {len(turns)} tool-calling turns")
    return _grade(problems, f"steps in order; progress reported in {len(noted)} of {len(turns)} turns")


def grade_task_specific(task: Task, trajectory: Trajectory) -> Grade:
    checks: Sequence[Mapping[str, str]] = task.info.get("file_checks") or ()
    if not checks:
        return Grade(score=1.0, detail="no task-specific checks")
    _, after, _ = _final_tree(task, trajectory)
    files = after or {}
    problems = [
        f"{c['path']}: {c.get('why', 'missing ' + repr(c['pattern']))}"
        for c in checks
        if not re.search(c["pattern"], files.get(c["path"], ""), re.M)
    ]
    return _grade(problems, f"{len(checks)} set-up check(s) hold")


def fixed_function(info: Mapping[str, Any]) -> tuple[str, str]:
    """(path, function name) of the bug in a ``repo_fix`` task, from the reference fix."""
    before, fixed = info["repo_files"], info["fixed"]
    path = next(p for p, text in fixed.items() if before[p] != text)
    return path, sorted(_changed_functions(before[path], fixed[path]))[0]


def patch_grader(weight: float = 0.1) -> Grader:
    """The final change applies cleanly, touches no protected file and is well formed."""
    return Grader(fn=grade_patch, name="patch", weight=weight)


def rollout_grader(variant_of: VariantOf = lambda: None, weight: float = 0.1) -> Grader:
    """Tools used accurately: well-formed, successful, non-redundant calls."""
    return Grader(fn=lambda t, tr: _rollout(t, tr, variant_of()), name="rollout", weight=weight)


def behaviour_grader(variant_of: VariantOf = lambda: None, weight: float = 0.1) -> Grader:
    """Ran the tests after the last edit (and they passed) and closed with a summary."""
    return Grader(fn=lambda t, tr: _behaviour(t, tr, variant_of()), name="behaviour", weight=weight)


def user_experience_grader(variant_of: VariantOf = lambda: None, weight: float = 0.1) -> Grader:
    """Followed the user's steps in order and reported progress along the way."""
    return Grader(
        fn=lambda t, tr: _user_experience(t, tr, variant_of()), name="user_experience", weight=weight
    )


def task_specific_grader(weight: float = 0.1) -> Grader:
    """The task's own set-up requirements (``task.info["file_checks"]``) hold in the final files."""
    return Grader(fn=grade_task_specific, name="task_specific", weight=weight)


GRADERS: dict[str, Callable[[], Grader]] = {
    "patch": patch_grader,
    "rollout": rollout_grader,
    "behaviour": behaviour_grader,
    "user_experience": user_experience_grader,
    "task_specific": task_specific_grader,
}
