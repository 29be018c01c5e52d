"""Suites: named sets of environments run as one eval, summarised in one scorecard.

``run_suite("holistic", policy, base_config, out=DIR)`` evaluates each environment of the
suite with ``verigym.evaluate`` (``eval.workflow.aevaluate``) into ``DIR/<env>/`` (results, summary,
report as a normal eval) and writes ``DIR/scorecard.json`` and ``DIR/scorecard.html``: per environment the
mean reward with its 95% CI, pass@k, per-grader means and errors, with a radar plot (bar plot
for fewer than three environments). An environment that cannot be loaded or whose run fails is
an error row in the scorecard, never a zero.

``policy`` is one ``Policy`` for every environment, or ``"oracle"`` / ``"null"`` to use each
environment's own oracle or null policy (a self-check of the whole collection).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verigym._files import write_json
from verigym._report import HtmlReport, figure
from verigym.eval.workflow import EvalSetupError
from verigym.graders.penalties import RubricSpec
from verigym.record import new_header, write_header
from verigym.tools.mcp_config import ToolsSpec

if TYPE_CHECKING:
    from verigym.eval.config import EvalConfig
    from verigym.policies.base import Policy
    from verigym.policies.trained import TrainingRecord

__all__ = ["SUITES", "SuiteError", "run_suite", "suite_members", "write_scorecard"]

SuiteMember = tuple[str, dict[str, Any]]

SUITES: dict[str, tuple[SuiteMember, ...]] = {
    "holistic": (
        ("arithmetic", {"level": 3}),
        ("math", {}),
        ("code", {}),
        ("tools", {}),
        ("wordle", {}),
        ("instructions", {}),
        ("json_extract", {}),
        ("search", {"level": 2}),
        ("repo_fix", {}),
        ("rubric_writing", {}),
    ),
    "agentic": (("tools", {}), ("search", {"level": 3}), ("repo_fix", {"level": 2}), ("wordle", {})),
    "reasoning": (("arithmetic", {"level": 5}), ("math", {}), ("code", {})),
    "smoke": (("arithmetic", {}), ("search", {"level": 1}), ("rubric_writing", {})),
}
"""Built-in suites: name -> ((environment, env args), ...)."""


class SuiteError(ValueError):
    """An unknown suite name; the message lists the known ones."""


def suite_members(name: str) -> tuple[SuiteMember, ...]:
    """The members of suite ``name``; a comma-separated list of environments, or one, also works."""
    if name in SUITES:
        return SUITES[name]
    if "," in name:
        return tuple((n.strip(), {}) for n in name.split(",") if n.strip())
    from verigym.envs.registry import list_envs

    if name in list_envs():
        return ((name, {}),)
    raise SuiteError(
        f"unknown suite {name!r}; known suites: {', '.join(SUITES)} (or a comma-separated env list)"
    )


def _failure(exc: BaseException) -> str:
    """A member's error: what the environment, its loader or the run raised (a set-up line's cause)."""
    cause = exc.__cause__ if isinstance(exc, EvalSetupError) and exc.__cause__ is not None else exc
    return f"{type(cause).__name__}: {cause}"


def _row(env: str, summary: Mapping[str, Any] | None, error: str | None) -> dict[str, Any]:
    if summary is None:
        return {"env": env, "error": error, "reward_mean": None}
    return {
        "env": env,
        "error": error,
        "reward_mean": summary.get("reward_mean"),
        "reward_ci95": summary.get("reward_ci95"),
        "pass_at_k": summary.get("pass_at_k", {}),
        "grader_means": summary.get("grader_means", {}),
        "n_samples": summary.get("n_samples"),
        "n_errors": summary.get("n_errors"),
        "errors_by_kind": summary.get("errors_by_kind", {}),
    }


async def run_suite(
    suite: str,
    policy: Policy | str,
    base: EvalConfig,
    *,
    out: Path,
    resume: bool = False,
    env_overrides: Mapping[str, Any] | None = None,
    on_env: Callable[[str, int, int], None] | None = None,
    on_record: Callable[[Any], None] | None = None,
    record: TrainingRecord | None = None,
    on_message: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Evaluate every environment of ``suite`` into ``out/<env>/`` and write the scorecard.

    ``env_overrides`` are extra env args given to every member (e.g. ``tool_variant``); a member
    that does not take one fails to load and is an error row. ``on_env(name, i, n)`` is called
    before each environment. ``record``: the policy's training record (``policies.trained``): a
    member it was trained on gets the recorded arguments that neither the suite nor
    ``env_overrides`` sets (``eval.trained``), and ``on_message`` the line that says so.
    """
    from verigym.eval.trained import trained_args
    from verigym.eval.workflow import EvalEvent, aevaluate, open_environment

    def forward(event: EvalEvent) -> None:
        if on_record is not None and event.kind == "record":
            on_record(event.record)

    members = suite_members(suite)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    header = new_header(
        "suite",
        {
            "suite": suite,
            "policy": policy if isinstance(policy, str) else policy.name,
            "env_overrides": dict(env_overrides or {}),
            "base": base.model_dump(mode="json"),
        },
        seeds={"seed": base.seed},
        resumed=resume,
    )
    write_header(out, header)  # run.json: the suite's run record; each member's folder has its own
    rows: list[dict[str, Any]] = []
    for i, (name, args) in enumerate(members):
        if on_env is not None:
            on_env(name, i, len(members))
        env_args = {**args, **(env_overrides or {})}
        trained = trained_args(name, env_args, record) if not isinstance(policy, str) else None
        if trained is not None:
            env_args = trained.args
            if on_message is not None:
                on_message(trained.message)
        # penalties and MCP tools are one environment's options (the CLI refuses them for a suite)
        update = {
            "env": name,
            "env_args": env_args,
            "env_args_from": {k: v for k, v in (trained.sources if trained else {}).items() if v != "user"},
            "out": str(out / name),
            "rubric": RubricSpec(),
            "tools": ToolsSpec(),
        }
        config = base.model_copy(update=update)
        try:
            env = open_environment(name, env_args)
            chosen: Policy | None
            if isinstance(policy, str):
                chosen = env.oracle_policy() if policy == "oracle" else env.null_policy()
                if chosen is None:
                    raise ValueError(f"environment {name!r} has no {policy} policy")
            else:
                chosen = policy
            result = await aevaluate(env, chosen, config, resume=resume, on_event=forward)
        except Exception as exc:  # one member failing is an error row, the suite goes on
            rows.append(_row(name, None, _failure(exc)))
            continue
        rows.append(_row(name, result.summary, None))
    card: dict[str, Any] = {"suite": suite, "policy": policy if isinstance(policy, str) else policy.name}
    card["envs"] = rows
    ok = [r["reward_mean"] for r in rows if r["reward_mean"] is not None]
    card["mean_reward"] = sum(ok) / len(ok) if ok else None
    card["n_env_errors"] = sum(1 for r in rows if r["error"])
    write_json(out / "scorecard.json", card)
    write_scorecard(card, out / "scorecard.html")
    write_header(out, header.finished(time.perf_counter() - start))
    return card


def _plot(report: HtmlReport, rows: Sequence[Mapping[str, Any]]) -> None:
    names = [str(r["env"]) for r in rows]
    values = [float(r["reward_mean"]) if r["reward_mean"] is not None else 0.0 for r in rows]
    if len(rows) >= 3:
        fig = figure(5.5, 5.5)
        ax = fig.add_subplot(1, 1, 1, projection="polar")
        angles = [2 * math.pi * i / len(rows) for i in range(len(rows))]
        ax.plot([*angles, angles[0]], [*values, values[0]], color="#36c")
        ax.fill([*angles, angles[0]], [*values, values[0]], color="#36c", alpha=0.25)
        ax.set_xticks(angles)
        ax.set_xticklabels(names, fontsize=8)
        ax.set_ylim(0, max(1.0, *values))
    else:
        fig = figure(6, 3)
        ax = fig.add_subplot(1, 1, 1)
        ax.bar(names, values, color="#36c")
        ax.set_ylim(0, max(1.0, *values))
        ax.set_ylabel("mean reward")
    report.image(fig, "mean reward per environment (errored environments at 0, see the table)")


def write_scorecard(card: Mapping[str, Any], path: str | Path) -> Path:
    """The scorecard page: the plot, a table per environment, per-grader means."""
    rows = list(card["envs"])
    report = HtmlReport(f"verigym suite {card['suite']} — {card['policy']}")
    mean = card.get("mean_reward")
    report.paragraph(
        f"{len(rows)} environments; mean reward over the scored ones: "
        f"{'–' if mean is None else f'{mean:.3f}'}; environments that errored: {card.get('n_env_errors', 0)}."
    )
    if rows:
        _plot(report, rows)
    table = []
    for r in rows:
        ci = r.get("reward_ci95")
        passk = r.get("pass_at_k") or {}
        table.append(
            [
                r["env"],
                "–" if r["reward_mean"] is None else f"{r['reward_mean']:.3f}",
                f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "–",
                ", ".join(f"@{k} {v:.3f}" for k, v in passk.items() if v is not None) or "–",
                r.get("n_errors", "–") if not r["error"] else "env failed",
                r["error"] or json.dumps(r.get("errors_by_kind") or {}),
            ]
        )
    report.table(table, header=["environment", "reward", "95% CI", "pass@k", "errors", "error detail"])
    report.heading("Per grader")
    grader_rows = [
        [r["env"], name, "–" if v is None else f"{v:.3f}"]
        for r in rows
        for name, v in (r.get("grader_means") or {}).items()
    ]
    report.table(grader_rows, header=["environment", "grader", "mean"])
    return report.write(path)
