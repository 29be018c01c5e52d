"""The ``verigym`` command line: one Typer app; each command lives in ``verigym._cli.<name>``.

Heavy libraries (torch, transformers) are imported inside commands, so ``verigym --help``
stays fast.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer._click.exceptions import ClickException, UsageError  # typer vendors click
from typer.core import TyperGroup

from verigym._cli.common import error_line

__all__ = ["app", "main"]


class _OneLineErrors(TyperGroup):
    """Usage errors (a bad flag value, an unknown option or command) as one line with exit code 2,
    instead of Click's usage box; the same form as every other bad-input error (``common.fail``)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "verigym"
            error_line(f"{where}: {exc.format_message()}{_given(exc)} (see {where} --help)")
            sys.exit(2)
        except ClickException as exc:
            error_line(exc.format_message())
            sys.exit(2 if exc.exit_code == 1 else exc.exit_code)
        except typer.Abort:
            error_line("aborted")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)


def _given(exc: BaseException) -> str:
    """`` (got 'ten')`` when the error came from a value that failed to convert."""
    errors = getattr(exc.__cause__, "errors", None)
    if callable(errors):
        with contextlib.suppress(Exception):
            return f" (got {errors()[0]['input']!r})"
    return ""


app = typer.Typer(
    cls=_OneLineErrors,
    name="verigym",
    help="Build verifiable environments, evaluate models on them, train with SFT and RL, and select at test time.",
    no_args_is_help=True,
    epilog="Library warnings and load bars go to the run's library.log (or ~/.verigym/logs/COMMAND.log); "
    "--verbose anywhere on the line shows them too.",
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module exposes ``register(app)``; the order is the order in ``--help``.
_COMMAND_MODULES = (
    "quickstart",
    "eval_cmd",
    "envs_cmd",
    "models_cmd",
    "serve_cmd",
    "envserver_cmd",
    "verifier_cmd",
    "train_cmd",
    "select_cmd",
    "data_cmd",
    "collection_cmd",
    "view_cmd",
)

for _name in _COMMAND_MODULES:
    importlib.import_module(f"verigym._cli.{_name}").register(app)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; ``--verbose`` anywhere on the line shows the libraries' own warnings and log lines."""
    from verigym._library_output import capture

    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in args
    args = [a for a in args if a != "--verbose"]
    capture(next((a for a in args if not a.startswith("-")), "verigym"), verbose=verbose)
    app(args, prog_name="verigym")


if __name__ == "__main__":
    main()
