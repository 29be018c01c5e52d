"""CLI: ``verigym envs`` (list environments) and ``verigym check-env NAME`` (conformance check)."""

from __future__ import annotations

import typer
from rich.table import Table

from verigym._cli._agentic_opts import AGENT_CMD_HELP, AGENT_HELP
from verigym._cli.common import console, fail, parse_kv

__all__ = ["register"]


def envs() -> None:
    """List the available environments (built-in and installed) with a one-line description."""
    from verigym.envs.registry import env_arguments, list_envs

    table = Table(title="verigym environments", title_justify="left")
    table.add_column("name", style="bold cyan", no_wrap=True)
    table.add_column("description")
    table.add_column("arguments (--env-arg)", style="dim")
    for name, description in list_envs().items():
        try:
            arguments = env_arguments(name)
        except Exception as exc:  # a third-party package that fails to import is listed, not fatal
            arguments = f"(cannot load: {type(exc).__name__})"
        table.add_row(name, description, arguments)
    console.print(table)
    console.print("Load one with [bold]verigym.load_env(NAME, **kwargs)[/] or [bold]--env-arg key=value[/].")


def check_env_cmd(
    name: str = typer.Argument(
        ..., help="Environment name, or an import spec 'module:attr' / 'file.py:attr'."
    ),
    env_arg: list[str] = typer.Option(
        None, "--env-arg", help="Environment argument key=value (repeatable), e.g. --env-arg level=3."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed for the tasks checked."),
    num_tasks: int = typer.Option(8, "-n", "--num-tasks", help="Number of tasks to check."),
    agent: str = typer.Option(None, "--agent", help=AGENT_HELP),
    agent_cmd: str = typer.Option(None, "--agent-cmd", help=AGENT_CMD_HELP),
) -> None:
    """Check that an environment conforms: deterministic tasks, hidden info, rollouts, graders, JSON."""
    from verigym.envs.check import check_env
    from verigym.envs.datasets import DatasetError
    from verigym.envs.registry import EnvError, load_env

    kwargs = parse_kv(env_arg, "--env-arg")
    if num_tasks < 1:
        fail(f"--num-tasks must be at least 1, got {num_tasks}")
    try:
        env = load_env(name, **kwargs)
    except (EnvError, DatasetError) as exc:
        fail(str(exc))
    if agent is not None or agent_cmd is not None:  # the env's oracle and null through the agent program
        from verigym.agents import agent_env

        try:
            env = agent_env(env, agent, agent_cmd)
        except ValueError as exc:
            fail(str(exc))
    try:
        with console.status(f"checking {name}..."):
            report = check_env(env, n=num_tasks, seed=seed, name=name)
    except DatasetError as exc:
        fail(str(exc))
    table = Table(title=f"check-env {name}", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("detail")
    marks = {"pass": "[green]pass[/]", "fail": "[bold red]FAIL[/]", "skip": "[yellow]skip[/]"}
    for result in report.results:
        table.add_row(result.name, marks[result.status], result.detail)
    console.print(table)
    if not report.ok:
        console.print(f"[bold red]{len(report.failures)} check(s) failed[/]")
        raise typer.Exit(1)
    console.print("[green]all checks passed[/]")


def register(app: typer.Typer) -> None:
    """Add ``envs`` and ``check-env`` to ``app``."""
    app.command("envs")(envs)
    app.command("check-env")(check_env_cmd)
