"""The ``repo_fix`` grader family's verdict: its grader stack measured by replaying labeled episodes.

It needs the environment (tools, sandboxed visible tests), so it lives here, not in
``verigym.graders``: ``envs.repo_fix`` declares the family (``RepoFixEnv.grader_family``) with a
verdict that builds the env and calls ``replay_verdict(env, line)``, found by
``envs.registry.load_grader_family("repo_fix")``.

``verigym verifier-bench --grader repo_fix --suite tests/suites/repo_fix_graders.jsonl``

A suite line names a task (``seed``, ``level``), the grader under test (``unit_tests``, ``patch``,
``rollout``, ``behaviour``, ``user_experience``, ``task_specific``), an episode and the label:
``turns`` is a list of ``{"say": text, "calls": [[tool, {args}], ...]}`` and ``final`` the closing
message. The episode is played through the real environment (the real tools, the visible tests in
the sandbox), so tool answers are what a model would have seen. Strings in tool arguments and in
``final`` may use macros, so lines stay short: ``@bug`` (the buggy file's path), ``@test`` (its visible tests file), ``@fixed`` (the
reference fix of that file), ``@original``, ``@fixed_ws`` (the fix with trailing spaces),
``@fixed_nonl`` (without the final newline), ``@fixed_tabs`` (plus a tab-indented helper),
``@bloated`` (the fix plus 40 unrelated lines), ``@broken`` (a syntax error), ``@changelog`` (the
changelog with an entry naming the fixed function), ``@changelog_vague`` (an entry naming nothing),
and ``{func}`` / ``{path}`` in text. Accepted = the grader scored 1.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from verigym.envs.builtin._repo_fix_graders import fixed_function
from verigym.envs.tool import ToolEnv
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Message, Sampling, ToolCall

__all__ = ["SUITE_FIELDS", "replay_verdict"]

SUITE_FIELDS = ("grader", "seed", "turns")


def _macros(info: Mapping[str, Any]) -> dict[str, str]:
    path, func = fixed_function(info)
    fixed = str(info["fixed"][path])
    log = str(info["repo_files"]["CHANGELOG.md"])
    extra = "".join(f"\n\ndef helper_{i}(x):\n    return x + {i}\n" for i in range(10))
    return {
        "@bug": path,
        "@test": "tests/test_" + path.rsplit("/", 1)[-1],
        "@fixed_ws": fixed.replace("\n", "   \n", 3),
        "@fixed_nonl": fixed.rstrip("\n"),
        "@fixed_tabs": fixed + "\n\ndef helper(x):\n\treturn x\n",
        "@fixed": fixed,
        "@original": str(info["repo_files"][path]),
        "@bloated": fixed + extra,
        "@broken": "def oops(:\n",
        "@changelog_vague": log + "- Fixed a bug.\n",
        "@changelog": log + f"- Fixed `{func}` in {path}.\n",
    }


def _expand(value: Any, macros: Mapping[str, str], text: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        if value in macros:
            return macros[value]
        return value.format_map(text) if "{" in value else value
    if isinstance(value, dict):
        return {k: _expand(v, macros, text) for k, v in value.items()}
    return value


def replay_verdict(env: ToolEnv, line: Mapping[str, Any]) -> bool:
    """True (accepted) when the line's grader scores its episode, replayed in ``env``, 1."""
    task = env.tasks(1, seed=int(line["seed"]))[0]
    macros = _macros(task.info)
    text = {"func": fixed_function(task.info)[1], "path": macros["@bug"]}
    turns: Sequence[Mapping[str, Any]] = line["turns"]
    variant = env.tool_variant
    plan: list[tuple[str, list[ToolCall]]] = []
    for t, turn in enumerate(turns):
        calls = []
        for c, (name, args) in enumerate(turn.get("calls", [])):
            raw = args if isinstance(args, str) else json.dumps(_expand(args, macros, text))
            call = ToolCall(id=f"c{t}-{c}", name=str(name), arguments=raw)
            calls.append(variant.to_variant(call) if variant is not None else call)
        plan.append((str(_expand(turn.get("say", ""), macros, text)), calls))
    final = str(_expand(line.get("final", ""), macros, text))

    def reply(messages: Sequence[Message]) -> Any:
        done = sum(1 for m in messages if m.role == "assistant")
        return plan[done] if done < len(plan) else final

    policy = ScriptedPolicy(reply, name="suite")
    traj = asyncio.run(env.rollout(task, policy, Sampling()))
    names = {g.name: g for g in env.rubric.graders}
    grader = names.get(str(line["grader"]))
    if grader is None:
        raise ValueError(
            f"line {line.get('id')!r}: unknown grader {line['grader']!r}; known: {sorted(names)}"
        )
    grade = asyncio.run(grader.grade(task, traj))  # type: ignore[union-attr]
    if not grade.ok:
        raise RuntimeError(f"grader {grader.name} errored: {grade.error}")
    return bool(grade.score >= 1.0)
