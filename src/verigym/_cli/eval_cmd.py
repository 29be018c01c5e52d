"""``verigym eval ENV``: evaluate a model on an environment; writes results, config, summary, report.

The command resolves its configuration (defaults < saved config of a resumed run < ``--config``
< flags, ``_eval_run.resolve_config``) and hands it to the library's
``verigym.eval.workflow.aevaluate`` (environment, penalties and MCP tools, tasks, policy, endpoint
check, the run), showing its events as a rich progress bar and the summary as a table
(``_eval_run.run_with_progress``). Bad input is one red line and exit 2; errored samples that reach
``--fail-on-error`` (default: any) exit 1 once results, summary and report are written.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from verigym._cli._agentic_opts import (
    AGENT_CMD_HELP,
    AGENT_HELP,
    MCP_HELP,
    ON_ERROR_HELP,
    PENALTY_HELP,
    extend_config,
)
from verigym._cli._eval_run import resolve_config, run_with_progress
from verigym._cli.common import DTYPE_HELP, TOOL_FORMAT_HELP, EnvArg, Threads, fail, parse_kv, set_threads

__all__ = ["eval_command", "register"]


def _flag(*names: str, help: str) -> Any:
    """An option that is unset (None) unless given, so that --config and a resumed run's saved config
    can fill it (precedence: defaults < saved config < --config < flags)."""
    return typer.Option(None, *names, help=help)


def eval_command(
    env: str | None = typer.Argument(
        None, help="Environment: a name from `verigym envs`, or module:attr / file.py:attr."
    ),
    model: str | None = _flag(
        "--model",
        "-m",
        help="Model name at --base-url; without it a local model directory or a catalogue name "
        "(`verigym models pull NAME`, e.g. smollm2-135m-instruct).",
    ),
    base_url: list[str] | None = _flag(
        "--base-url",
        help="OpenAI-compatible endpoint; repeat to load-balance one model over several.",
    ),
    api_key_env: str | None = _flag(
        "--api-key-env", help="Name of the environment variable that holds the API key."
    ),
    dtype: str | None = _flag("--dtype", help=DTYPE_HELP),
    tool_format: str | None = _flag("--tool-format", help=TOOL_FORMAT_HELP),
    policy: str | None = _flag(
        "--policy",
        help="oracle or null: the environment's own policy instead of a model (no --model/"
        "--base-url), through the same results, summary and report (e.g. HumanEval's canonical "
        "solutions: `verigym eval humaneval --policy oracle -n 164`).",
    ),
    num_tasks: int | None = _flag("-n", "--num-tasks", help="Number of tasks (default 50)."),
    samples_per_task: int | None = _flag(
        "-k",
        "--samples-per-task",
        help="Samples per task; pass@k is reported for k=1..K (default 1).",
    ),
    concurrency: int | None = _flag(
        "--concurrency",
        help="Rollouts in flight at once (also per-endpoint requests) (default 32).",
    ),
    temperature: float | None = _flag("--temperature", help="Sampling temperature (default 1.0)."),
    max_tokens: int | None = _flag("--max-tokens", help="Max tokens per model completion (default 512)."),
    seed: int | None = _flag("--seed", help="Seed of the tasks and of each sample (default 0)."),
    env_arg: EnvArg = None,
    out: Path | None = _flag("--out", help="Output folder (default runs/<env>-<time>)."),
    resume: bool = typer.Option(
        False, "--resume", help="Continue the run in --out: skip finished samples, redo errored ones."
    ),
    config: Path | None = _flag(
        "--config",
        help="TOML file with these options (long names, underscores); flags override it.",
    ),
    harness: str | None = _flag("--harness", help="Harness variant, passed as env arg harness=."),
    tool_variant: int | None = _flag(
        "--tool-variant", help="Tool-set variation seed, passed as env arg tool_variant=."
    ),
    suite: str | None = _flag(
        "--suite", help="Evaluate a suite of environments (e.g. holistic) into one scorecard."
    ),
    mcp: list[str] | None = _flag("--mcp", help=MCP_HELP),
    penalty: list[str] | None = _flag("--penalty", help=PENALTY_HELP),
    agent: str | None = _flag("--agent", help=AGENT_HELP),
    agent_cmd: str | None = _flag("--agent-cmd", help=AGENT_CMD_HELP),
    agent_timeout_s: float | None = _flag(
        "--agent-timeout", help="Wall-clock limit of one run of the agent program, seconds (default 300)."
    ),
    on_error: str | None = _flag("--on-error", help=ON_ERROR_HELP),
    fail_on_error: float | None = _flag(
        "--fail-on-error",
        help="Errored samples (after the retries that are safe) that make the run exit 1 once its "
        "files are written, as inspect_ai reads it: a share of the samples below 1 (0.1: a tenth), "
        "else a count (5: five). Without it, any errored sample does.",
    ),
    no_fail_on_error: bool = typer.Option(
        False,
        "--no-fail-on-error",
        help="Exit 0 however many samples errored, unless every one did (they are still counted).",
    ),
    threads: Threads = None,
) -> None:
    """Evaluate a model on an environment: results.jsonl, config.json, summary.json, report.html."""
    set_threads(threads)
    if no_fail_on_error and fail_on_error is not None:
        fail("give either --fail-on-error or --no-fail-on-error, not both")
    env_args = parse_kv(env_arg, "--env-arg")
    if harness is not None:
        env_args["harness"] = harness
    if tool_variant is not None:
        env_args["tool_variant"] = tool_variant
    flags = {
        "env": env,
        "model": model,
        "base_url": base_url or None,
        "api_key_env": api_key_env,
        "dtype": dtype,
        "tool_format": tool_format,
        "policy": policy,
        "num_tasks": num_tasks,
        "samples_per_task": samples_per_task,
        "concurrency": concurrency,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "seed": seed,
        "out": str(out) if out else None,
        "env_args": env_args,
        "agent": agent,
        "agent_cmd": agent_cmd,
        "agent_timeout_s": agent_timeout_s,
        "on_error": on_error,
        "fail_on_error": False if no_fail_on_error else fail_on_error,
    }
    if suite is not None:  # one scorecard over a named set of environments
        from verigym._cli.collection_cmd import run_suite_command

        if env is not None:
            fail("give either ENV or --suite, not both")
        if mcp or penalty:
            fail("--mcp and --penalty apply to one environment, not to --suite")
        cfg, _ = resolve_config({**flags, "env": suite}, config, resume)
        run_suite_command(suite, cfg, policy_kind=cfg.policy, resume=resume)
        return
    cfg, _ = resolve_config(flags, config, resume)
    cfg = extend_config(cfg, mcp, penalty)
    if cfg.out is None:
        from verigym.eval.workflow import default_out

        cfg = cfg.model_copy(update={"out": default_out(cfg.env)})
    assert cfg.out is not None
    run_with_progress(cfg, Path(cfg.out), resume, fail_on_error=cfg.fail_on_error)
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    """Add ``verigym eval`` to ``app``."""
    app.command("eval")(eval_command)
