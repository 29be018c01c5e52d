"""The ``verigym`` command line: one Typer app; each command lives in ``verigym._cli.<name>``.

Heavy libraries (torch, transformers) are imported inside commands, so ``verigym --help``
stays fast.
"""

from __future__ import annotations

import importlib

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    name="verigym",
    help="Build verifiable environments, evaluate models on them, train with SFT and RL, and select at test time.",
    no_args_is_help=True,
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
    "verifier_cmd",
    "train_cmd",
    "select_cmd",
    "data_cmd",
    "collection_cmd",
)

for _name in _COMMAND_MODULES:
    importlib.import_module(f"verigym._cli.{_name}").register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
