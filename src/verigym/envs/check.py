"""``check_env``: a conformance check of an environment, like Gymnasium's ``check_env``.

Checks, each reported pass / fail / skip with a one-line reason:

1. ``tasks``: ``tasks(n, seed=)`` returns ``Task`` objects with unique ids, identical on a
   second call with the same seed; the ``train`` split shares no prompt with ``test``.
2. ``hidden-info``: no value of ``Task.info`` appears in what the policy is shown (prompt,
   system prompt, tool schemas), except under the info keys the environment lists in its
   ``public_info_keys`` attribute: parameters the prompt states on purpose (a keyword to use,
   the name of the function to write), which graders still need to read from ``info``.
3. ``rollout``: a scripted policy completes an episode of every task without an error; in a
   tool environment it first calls an unknown tool with bad JSON, which must not crash it.
4. ``graders``: the rubric has graders and each returns a valid, non-errored ``Grade``.
5. ``json``: tasks, trajectories and scores round-trip through JSON unchanged.
6. ``oracle`` / ``null``: when the environment provides them, the oracle's mean reward is
   ≥ 0.99 and the null policy's ≤ 0.05 (skipped otherwise).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Unpack

from verigym.envs.base import Environment
from verigym.envs.datasets import DatasetError
from verigym.policies.base import Policy, PolicyArgs
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Grade, Message, Sampling, Score, Task, ToolCall, Trajectory

__all__ = ["CheckReport", "CheckResult", "acheck_env", "check_env"]

Status = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    detail: str


@dataclass
class CheckReport:
    """The results of every check; ``ok`` when none failed."""

    env: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.status != "fail" for r in self.results)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "fail"]

    def add(self, name: str, status: Status, detail: str) -> None:
        self.results.append(CheckResult(name, status, detail))


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list | tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, bool) or value is None:
        return []
    return [str(value)]


class _Recorder:
    """Wraps a policy and keeps the first message list it was shown for each episode."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.seen: list[list[Message]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete(self, messages: Sequence[Message], **kw: Unpack[PolicyArgs]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            self.seen.append(list(messages))
        return await self.inner.complete(messages, **kw)


def _probe_reply(messages: Sequence[Message]) -> str | tuple[str, list[ToolCall]]:
    if not any(m.role == "tool" for m in messages):
        return "", [ToolCall(id="check-1", name="__verigym_no_such_tool__", arguments="{not json")]
    return "I am done."


async def _rollouts(env: Environment, tasks: Sequence[Task], policy: Policy) -> list[Trajectory]:
    sampling = Sampling(temperature=0.0, max_tokens=256)
    return list(await asyncio.gather(*(env.rollout(t, policy, sampling) for t in tasks)))


async def _mean_reward(env: Environment, tasks: Sequence[Task], policy: Policy) -> tuple[float | None, str]:
    trajs = await _rollouts(env, tasks, policy)
    scores = [await env.rubric.score(t, tr) for t, tr in zip(tasks, trajs, strict=True)]
    errors = [s.error for s in scores if s.error]
    if errors:
        return None, f"{len(errors)}/{len(scores)} samples errored, e.g. {errors[0]}"
    rewards = [s.reward for s in scores if s.reward is not None]
    return sum(rewards) / len(rewards), ""


def _check_tasks(env: Environment, report: CheckReport, n: int, seed: int) -> list[Task] | None:
    try:
        tasks = env.tasks(n, seed=seed)
        again = env.tasks(n, seed=seed)
    except DatasetError:  # bad input data, not a non-conforming environment: the caller reports it
        raise
    except Exception as exc:
        report.add("tasks", "fail", f"tasks({n}, seed={seed}) raised {type(exc).__name__}: {exc}")
        return None
    if not tasks or not all(isinstance(t, Task) for t in tasks):
        report.add("tasks", "fail", f"tasks({n}, seed={seed}) returned no Task objects")
        return None
    if len(tasks) > n:
        report.add("tasks", "fail", f"tasks({n}) returned {len(tasks)} tasks")
        return None
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        report.add("tasks", "fail", "task ids are not unique")
        return None
    if [t.model_dump_json() for t in tasks] != [t.model_dump_json() for t in again]:
        report.add("tasks", "fail", f"tasks differ between two calls with seed={seed}")
        return None
    notes = [f"{len(tasks)} tasks, deterministic under seed {seed}"]
    try:
        train = env.tasks(n, seed=seed, split="train")
    except Exception:  # an env without a train split is fine
        notes.append("no train split")
    else:
        prompts = {json.dumps([m.model_dump() for m in t.prompt]) for t in tasks}
        shared = [t.id for t in train if json.dumps([m.model_dump() for m in t.prompt]) in prompts]
        if shared:
            report.add(
                "tasks",
                "fail",
                f"train and test splits share prompts (train {shared[0]}); "
                "an env with one split should raise ValueError for the others",
            )
            return None
        notes.append("train/test disjoint")
    report.add("tasks", "pass", "; ".join(notes))
    return tasks


def _check_leaks(
    env: Environment, report: CheckReport, tasks: Sequence[Task], shown: list[list[Message]], min_len: int
) -> None:
    schemas = json.dumps(env.tool_schemas() or [])
    public = set(getattr(env, "public_info_keys", ()))
    for i, task in enumerate(tasks):
        seen = shown[i] if i < len(shown) else env.with_system_prompt(task.prompt)
        text = "\n".join(m.content for m in seen) + schemas
        for value in _leaves({k: v for k, v in task.info.items() if k not in public}):
            if len(value) >= min_len and value in text:
                report.add(
                    "hidden-info", "fail", f"task {task.id}: info value {value[:60]!r} appears in the prompt"
                )
                return
    report.add("hidden-info", "pass", f"no info value of ≥{min_len} characters is shown to the policy")


async def acheck_env(
    env: Environment,
    *,
    n: int = 8,
    seed: int = 0,
    name: str | None = None,
    min_leak_chars: int = 4,
    oracle_min: float = 0.99,
    null_max: float = 0.05,
) -> CheckReport:
    """Run every check on ``env`` with ``n`` tasks under ``seed`` (see the module docstring)."""
    report = CheckReport(env=name or env.name)
    tasks = _check_tasks(env, report, n, seed)
    if tasks is None:
        return report
    tool_env = bool(env.tool_schemas())
    probe = _Recorder(ScriptedPolicy(_probe_reply if tool_env else (lambda m: "I am done."), name="check"))
    try:  # one at a time, so the recorder's prompts line up with the tasks
        trajs = [await env.rollout(t, probe, Sampling(temperature=0.0, max_tokens=256)) for t in tasks]
    except Exception as exc:
        report.add("rollout", "fail", f"rollout raised {type(exc).__name__}: {exc}")
        return report
    _check_leaks(env, report, tasks, probe.seen, min_leak_chars)
    bad = next((t for t in trajs if t.error is not None or not t.turns), None)
    if bad is not None:
        why = f"{bad.error.kind}: {bad.error.message}" if bad.error else "no model turn recorded"
        report.add("rollout", "fail", f"task {bad.task_id}: {why}")
        return report
    wrong_id = next((t for t, tr in zip(tasks, trajs, strict=True) if tr.task_id != t.id), None)
    if wrong_id is not None:
        report.add("rollout", "fail", f"trajectory of task {wrong_id.id} has another task_id")
        return report
    extra = "; an unknown tool with bad JSON was reported to the model" if tool_env else ""
    report.add("rollout", "pass", f"{len(trajs)} episodes with a scripted policy{extra}")

    scores = [await env.rubric.score(t, tr) for t, tr in zip(tasks, trajs, strict=True)]
    if not env.rubric.graders:
        report.add("graders", "fail", "the rubric has no graders")
    else:
        problem = next(
            (
                f"task {t.id}: grader {gname!r} " + (f"errored: {g.error}" if isinstance(g, Grade) else "bad")
                for t, s in zip(tasks, scores, strict=True)
                for gname, g in s.grades.items()
                if not isinstance(g, Grade) or not g.ok
            ),
            None,
        )
        if problem is not None:
            report.add("graders", "fail", problem)
        else:
            report.add("graders", "pass", f"{len(env.rubric.graders)} grader(s) returned valid grades")
    _check_json(report, tasks, trajs, scores)

    for kind, policy in (("oracle", env.oracle_policy()), ("null", env.null_policy())):
        if policy is None:
            report.add(kind, "skip", f"the environment provides no {kind}_policy()")
            continue
        mean, err = await _mean_reward(env, tasks, policy)
        if mean is None:
            report.add(kind, "fail", err)
        elif kind == "oracle":
            report.add(
                kind,
                "pass" if mean >= oracle_min else "fail",
                f"mean reward {mean:.3f} (need ≥ {oracle_min})",
            )
        else:
            report.add(
                kind, "pass" if mean <= null_max else "fail", f"mean reward {mean:.3f} (need ≤ {null_max})"
            )
    return report


def _check_json(
    report: CheckReport, tasks: Sequence[Task], trajs: Sequence[Trajectory], scores: Sequence[Score]
) -> None:
    try:
        for t in tasks:
            if Task.model_validate_json(t.model_dump_json()) != t:
                raise ValueError(f"task {t.id} changes through JSON")
        for tr in trajs:
            dumped = tr.model_dump_json()
            if Trajectory.model_validate_json(dumped).model_dump_json() != dumped:
                raise ValueError(
                    f"trajectory of {tr.task_id} changes through JSON (is its state JSON-native?)"
                )
        for s in scores:
            dumped = s.model_dump_json()
            if Score.model_validate_json(dumped).model_dump_json() != dumped:
                raise ValueError("a score changes through JSON")
    except Exception as exc:
        report.add(
            "json", "fail", f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)
        )
        return
    report.add("json", "pass", "tasks, trajectories and scores round-trip through JSON")


def check_env(env: Environment, **kwargs: Any) -> CheckReport:
    """``acheck_env`` for synchronous callers (not from inside a running event loop)."""
    return asyncio.run(acheck_env(env, **kwargs))
