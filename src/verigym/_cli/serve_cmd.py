"""CLI: ``verigym serve MODEL_PATH`` — an OpenAI-compatible HTTP server for a local model.

The command checks its flags into a ``verigym.serve.workflow.ServeConfig`` and hands it to the library's
``serve_model`` (the config checked, the model opened through the one opener with its adapters, the app
served in the foreground), drawing its events. Bad input is one red line and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from verigym._cli._server_opts import (
    body_timeout_option,
    header_timeout_option,
    is_loopback,
    keep_alive_option,
    max_connections_option,
    resolve_api_key,
    server_limits,
)
from verigym._cli.common import Dtype, ToolFormat, console, fail

__all__ = ["load_policy", "register", "serve_cmd"]

# ``verigym.serve.ServeLimits``' defaults, spelled here so that ``verigym --help`` does not import the
# server (and torch); a test keeps them equal
MAX_BODY_BYTES, MAX_CONCURRENT_REQUESTS, MAX_QUEUED_TOKENS = 8 * 1024 * 1024, 256, 1 << 20


def load_policy(
    model_path: str,
    dtype: str | None,
    device: str | None,
    max_batch_rows: int,
    tool_format: str | None = None,
) -> Any:
    """The ``LocalPolicy`` for ``model_path`` (a directory, a hub name, or tiny/small/base for a fresh
    model) through the library's ``verigym.serve.workflow.open_served_policy``; what it says is printed
    and its failures are one line naming MODEL_PATH or the flag."""
    from verigym.serve.workflow import ServeConfig, ServeSetupError, open_served_policy

    config = ServeConfig(
        model=model_path, dtype=dtype, device=device, max_batch_rows=max_batch_rows, tool_format=tool_format
    )
    try:
        return open_served_policy(config, _show)
    except ServeSetupError as exc:
        fail(str(exc))


def _show(event: Any) -> None:
    """A ``ServeEvent`` before the server listens: a training record's lines, a fresh model's description."""
    if event.kind == "record":
        console.print(f"[dim]{escape(event.message)}[/]")
    elif event.kind == "policy":
        console.print(f"[yellow]{event.message}[/]")


def serve_cmd(
    model_path: str = typer.Argument(
        ..., help="A saved model directory (save_pretrained), a LoRA adapter directory, or tiny/small/base."
    ),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to bind (0.0.0.0 to accept remote clients)."
    ),
    port: int = typer.Option(8000, "--port", help="Port to listen on."),
    name: str | None = typer.Option(
        None, "--name", help="Model name clients use (default: the directory name)."
    ),
    dtype: Dtype = None,
    device: str | None = typer.Option(
        None, "--device", help="Device: cpu or cuda (default: cuda when available)."
    ),
    lora: list[str] = typer.Option(
        None, "--lora", help="Preload a LoRA adapter NAME=PATH (repeatable); clients use NAME as the model."
    ),
    max_batch_rows: int = typer.Option(256, "--max-batch-rows", help="Most sequences decoded in one pass."),
    tool_format: ToolFormat = None,
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="torch CPU threads (default: torch's choice; 1 is fastest for the tiny models).",
    ),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        help="Require 'Authorization: Bearer KEY' on every endpoint except /health (401 otherwise). "
        "A key on the command line shows in the process list: prefer --api-key-env.",
    ),
    api_key_env: str | None = typer.Option(
        None,
        "--api-key-env",
        help="Read the API key (as --api-key) from this environment variable, e.g. VERIGYM_API_KEY.",
    ),
    max_body_bytes: int = typer.Option(
        MAX_BODY_BYTES,
        "--max-body-bytes",
        help="Largest request body accepted (default 8 MiB); a larger one gets 413 before it is read.",
    ),
    max_concurrent_requests: int = typer.Option(
        MAX_CONCURRENT_REQUESTS,
        "--max-concurrent-requests",
        help="Most requests generating at once; past it a request gets 429 with Retry-After.",
    ),
    max_queued_tokens: int = typer.Option(
        MAX_QUEUED_TOKENS,
        "--max-queued-tokens",
        help="Most tokens (prompt + max_tokens, times n) of the requests generating at once; past it "
        "429 with Retry-After, and a request that alone needs more gets 400.",
    ),
    max_connections: int = max_connections_option(
        "Most open connections; past it a new one gets 503 with Retry-After and is closed. Held under the "
        "process's open-file limit, so the server sheds load before it runs out of sockets."
    ),
    header_timeout: float = header_timeout_option(),
    body_timeout: float = body_timeout_option(),
    keep_alive_timeout: float = keep_alive_option(),
    allow_adapter_loading: Path | None = typer.Option(
        None,
        "--allow-adapter-loading",
        metavar="DIR",
        help="Turn on /v1/load_lora_adapter, /v1/unload_lora_adapter and /update_weights_from_disk, for "
        "paths inside DIR only (relative paths are taken from DIR; '..', symlinks out of DIR and other "
        "absolute paths get 403). Off by default: they answer 403.",
    ),
) -> None:
    """Serve a local model over the OpenAI API (chat, completions, streaming, logprobs, token ids, LoRA)."""
    from verigym.serve import ServeLimits
    from verigym.serve.workflow import ServeConfig, ServeSetupError, check

    key = resolve_api_key(api_key, api_key_env)
    for flag, value in (
        ("--max-body-bytes", max_body_bytes),
        ("--max-concurrent-requests", max_concurrent_requests),
        ("--max-queued-tokens", max_queued_tokens),
    ):
        if value < 1:
            fail(f"{flag} must be at least 1, got {value}")
    server = server_limits(max_connections, header_timeout, body_timeout, keep_alive_timeout)
    config = ServeConfig(
        model=model_path,
        host=host,
        port=port,
        name=name,
        dtype=dtype,
        device=device,
        lora=tuple(lora or ()),
        max_batch_rows=max_batch_rows,
        tool_format=tool_format,
        threads=threads,
        api_key=key,
        limits=ServeLimits(max_body_bytes, max_concurrent_requests, max_queued_tokens),
        server_limits=server,
        adapter_dir=allow_adapter_loading.expanduser() if allow_adapter_loading is not None else None,
    )
    try:
        check(config)  # before torch loads: a bad port or folder is told at once
        _serve(config)
    except ServeSetupError as exc:
        fail(str(exc))


def _serve(config: Any) -> None:
    """``verigym.serve.workflow.serve_model`` with its events drawn: a spinner while the model loads, its
    record's lines, then where it is served and how it is guarded."""
    from transformers.utils import logging as hf_logging

    from verigym.serve.workflow import ServeEvent, serve_model

    hf_logging.disable_progress_bar()
    status = console.status(f"loading {config.model}...")

    def on_event(event: ServeEvent) -> None:
        if event.kind == "loading":
            status.start()
            return
        if event.kind != "ready":
            _show(event)
            return
        status.stop()
        console.print(
            f"Serving [bold]{event.name}[/] ({event.parameters:,} parameters, {event.device}) at "
            f"[bold]{event.url}[/] — Ctrl-C to stop"
        )
        if event.adapters:
            console.print(f"LoRA adapters: {', '.join(event.adapters)}")
        if config.adapter_dir is not None:
            console.print(f"Loading weights at run time: from {config.adapter_dir.resolve()} only")
        if config.api_key is not None:
            console.print("API key required (Authorization: Bearer ...) on every endpoint but /health")
        elif not is_loopback(config.host):
            console.print(
                f"[yellow]--host {config.host} without --api-key-env: anyone who can reach this port can use "
                "the model[/]"
            )

    try:
        serve_model(config, on_event=on_event)
    finally:
        status.stop()


def register(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""
    app.command("serve")(serve_cmd)
