"""Shared CLI helpers: one-line errors with exit code 2, the rich console, key=value parsing, the
policy an eval configuration asks for (used by ``eval`` and ``suite``), and the options several
commands declare word for word (``Threads``, ``EnvArg``, ``BaseUrl``, ``Temperature``, ``MaxTokens``,
and ``Dtype``/``ToolFormat`` on every command that opens an in-process model), and ``model_spec``,
a ``ModelSpec`` from a command's flags or one line naming the flag it refuses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from verigym.eval.config import EvalConfig
    from verigym.policies.base import Policy

__all__ = [
    "DTYPE_HELP",
    "THREADS_HELP",
    "TOOL_FORMAT_HELP",
    "BaseUrl",
    "Dtype",
    "EnvArg",
    "MaxTokens",
    "Temperature",
    "Threads",
    "ToolFormat",
    "console",
    "error_line",
    "eval_policy",
    "fail",
    "model_spec",
    "parse_kv",
    "set_threads",
]

THREADS_HELP = (
    "torch CPU threads for a local model (default: torch's choice, one per core; on a loaded machine 1-2 "
    "threads can decode several times faster)."
)

DTYPE_HELP = (
    "Weights dtype of an in-process model: auto (bfloat16 on CUDA, float32 otherwise; the default), "
    "float32, bfloat16 or float16."
)
TOOL_FORMAT_HELP = (
    "Tool-call format of an in-process model (hermes, llama3, mistral, smollm2; default: the one the "
    "checkpoint was trained with, else the tokenizer's)."
)

# Options declared once for every command that has them (``threads: Threads = None``).
Threads = Annotated[int | None, typer.Option("--threads", help=THREADS_HELP)]
EnvArg = Annotated[
    list[str] | None, typer.Option("--env-arg", help="key=value passed to the environment; repeatable.")
]
BaseUrl = Annotated[
    list[str] | None, typer.Option("--base-url", help="OpenAI-compatible endpoint; repeatable.")
]
Temperature = Annotated[float, typer.Option("--temperature", help="Sampling temperature.")]
MaxTokens = Annotated[int | None, typer.Option("--max-tokens", help="Max tokens per completion.")]

Dtype = Annotated[str | None, typer.Option("--dtype", help=DTYPE_HELP)]
ToolFormat = Annotated[str | None, typer.Option("--tool-format", help=TOOL_FORMAT_HELP)]

console = Console(stderr=False)
_err = Console(stderr=True)


def error_line(message: str) -> None:
    """Print ``error: message`` on stderr as one line (markup in ``message`` is not interpreted)."""
    _err.print(f"[bold red]error:[/] {escape(' '.join(message.split()))}", highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one clear line (no traceback) and exit with ``code``."""
    error_line(message)
    raise typer.Exit(code)


def set_threads(threads: int | None) -> None:
    """Apply ``--threads`` (None: leave torch's default)."""
    if threads is None:
        return
    if threads < 1:
        fail(f"--threads must be at least 1, got {threads}")
    import torch

    torch.set_num_threads(threads)


def _coerce(value: str) -> Any:
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def parse_kv(items: list[str] | None, flag: str) -> dict[str, Any]:
    """Parse repeated ``key=value`` flags; ints, floats and booleans are converted."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"{flag} {item!r}: expected key=value")
        out[key.strip()] = _coerce(value.strip())
    return out


def eval_policy(config: EvalConfig) -> tuple[Policy, str, bool]:
    """The policy, a line describing it, and whether it is remote (to check the endpoint)."""
    from verigym.eval.workflow import EvalSetupError, open_policy

    try:
        opened = open_policy(config.model_spec())
    except EvalSetupError as exc:
        fail(str(exc))
    return opened.policy, opened.description, opened.remote


def model_spec(values: dict[str, Any]) -> Any:
    """The ``ModelSpec`` of a command's flag values (its field names), or one line naming the flag
    whose value it refuses (``--dtype int8: Input should be ...``) and exit 2."""
    from pydantic import ValidationError

    from verigym.policies.spec import ModelSpec

    try:
        return ModelSpec.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "--" + str(first["loc"][0]).replace("_", "-")
        fail(f"{name} {first.get('input')}: {str(first['msg']).removeprefix('Value error, ')}")
