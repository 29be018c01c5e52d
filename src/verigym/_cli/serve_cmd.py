"""CLI: ``verigym serve MODEL_PATH`` — an OpenAI-compatible HTTP server for a local model."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path
from typing import Any

import typer

from verigym._cli.common import Dtype, ToolFormat, console, fail, model_spec

__all__ = ["register"]

# ``verigym.serve.ServeLimits``' defaults, spelled here so that ``verigym --help`` does not import the
# server (and torch); a test keeps them equal
MAX_BODY_BYTES, MAX_CONCURRENT_REQUESTS, MAX_QUEUED_TOKENS = 8 * 1024 * 1024, 256, 1 << 20
# and ``verigym._http_server.ServerLimits``' (the same test)
MAX_CONNECTIONS, HEADER_TIMEOUT_S, BODY_TIMEOUT_S, KEEP_ALIVE_S = 1000, 30.0, 120.0, 5.0


def load_policy(
    model_path: str,
    dtype: str | None,
    device: str | None,
    max_batch_rows: int,
    tool_format: str | None = None,
) -> Any:
    """The ``LocalPolicy`` for ``model_path`` (a directory, a hub name, or tiny/small/base for a fresh
    model) through the one opener (``policies.spec.open_model``); its failures name MODEL_PATH or the flag."""
    from verigym.policies.base import ModelSpecError, PolicyError
    from verigym.policies.default import resolve_model_dir
    from verigym.policies.spec import open_model

    values = {"model": model_path, "dtype": dtype or "auto", "device": device, "tool_format": tool_format}
    spec = model_spec({**values, "max_batch_rows": max_batch_rows})
    path = Path(model_path).expanduser()
    found = resolve_model_dir(path) if path.is_dir() else None
    record = _record(found) if found is not None else None  # said before the (slow) load
    try:
        opened = open_model(spec)
    except ModelSpecError as exc:
        if exc.field != "model":
            fail(exc.worded("--"))
        fail(exc.worded({"model": "MODEL_PATH"}) if exc.value is not None else f"MODEL_PATH {exc}")
    except (PolicyError, ValueError, OSError) as exc:
        fail(f"MODEL_PATH {model_path}: {exc}")
    if record is None and found is None and model_path in ("tiny", "small", "base"):
        console.print(f"[yellow]{opened.description}[/]")
    return opened.policy


def _record(model_dir: Path) -> Any:
    """The training record of a checkpoint verigym trained (``policies.trained``), said in one line:
    what it was trained on, the tool format it is served in, and the eval that matches its training."""
    from rich.markup import escape

    from verigym.policies.trained import RecordError, read_record

    try:
        record = read_record(model_dir)
    except RecordError as exc:
        fail(f"MODEL_PATH {model_dir}: {exc}")
    if record is None:
        return None
    console.print(f"[dim]{escape(str(model_dir))}: {escape(record.describe())}[/]")
    for env in record.envs:
        args = "".join(f" --env-arg {k}={_arg(v)}" for k, v in env.args.items())
        if args:
            console.print(
                f"[dim]  evaluate it as trained: verigym eval {env.name} --base-url URL{escape(args)}[/]"
            )
    return record


def _arg(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value)


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
    max_connections: int = typer.Option(
        MAX_CONNECTIONS,
        "--max-connections",
        help="Most open connections; past it a new one gets 503 with Retry-After and is closed. Held "
        "under the process's open-file limit, so the server sheds load before it runs out of sockets.",
    ),
    header_timeout: float = typer.Option(
        HEADER_TIMEOUT_S,
        "--header-timeout",
        help="Seconds a client has to send a request's line and headers (408 and closed past it).",
    ),
    body_timeout: float = typer.Option(
        BODY_TIMEOUT_S,
        "--body-timeout",
        help="Seconds a client has to send a request's body once its headers are in (closed past it).",
    ),
    keep_alive_timeout: float = typer.Option(
        KEEP_ALIVE_S, "--keep-alive-timeout", help="Seconds an idle kept-alive connection stays open."
    ),
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
    if not 0 < port < 65536:
        fail(f"--port must be in 1..65535, got {port}")
    if max_batch_rows < 1:
        fail(f"--max-batch-rows must be at least 1, got {max_batch_rows}")
    key = _api_key(api_key, api_key_env)
    for flag, value in (
        ("--max-body-bytes", max_body_bytes),
        ("--max-concurrent-requests", max_concurrent_requests),
        ("--max-queued-tokens", max_queued_tokens),
    ):
        if value < 1:
            fail(f"{flag} must be at least 1, got {value}")
    if max_connections < 1:
        fail(f"--max-connections must be at least 1, got {max_connections}")
    for flag, seconds in (
        ("--header-timeout", header_timeout),
        ("--body-timeout", body_timeout),
        ("--keep-alive-timeout", keep_alive_timeout),
    ):
        if not 0 < seconds < 1e9:  # NaN fails both
            fail(f"{flag} must be a number of seconds above 0, got {seconds}")
    if allow_adapter_loading is not None and not allow_adapter_loading.expanduser().is_dir():
        fail(f"--allow-adapter-loading {allow_adapter_loading}: no such directory")
    adapter_dir = allow_adapter_loading.expanduser() if allow_adapter_loading is not None else None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            fail(f"--host {host} --port {port}: cannot listen there ({exc.strerror})")
    if threads is not None and threads < 1:
        fail(f"--threads must be at least 1, got {threads}")
    import torch
    from transformers.utils import logging as hf_logging

    from verigym.policies.base import PolicyError
    from verigym.policies.tiny import count_parameters
    from verigym.serve import ServeLimits, ServerLimits, serve

    hf_logging.disable_progress_bar()
    if threads is not None:
        torch.set_num_threads(threads)

    with console.status(f"loading {model_path}..."):
        policy = load_policy(model_path, dtype, device, max_batch_rows, tool_format)
        for item in lora or []:
            adapter, sep, path = item.partition("=")
            if not sep or not adapter or not path:
                fail(f"--lora {item!r}: expected NAME=PATH")
            try:
                policy.load_adapter(path, adapter)
            except PolicyError as exc:
                fail(f"--lora {item}: {exc}")
    served = name or policy.name
    params = count_parameters(policy.model)
    console.print(
        f"Serving [bold]{served}[/] ({params:,} parameters, {next(policy.model.parameters()).device}) at "
        f"[bold]http://{host}:{port}/v1[/] — Ctrl-C to stop"
    )
    if policy.adapters:
        console.print(f"LoRA adapters: {', '.join(policy.adapters)}")
    if adapter_dir is not None:
        console.print(f"Loading weights at run time: from {adapter_dir.resolve()} only")
    if key is not None:
        console.print("API key required (Authorization: Bearer ...) on every endpoint but /health")
    elif not _loopback(host):
        console.print(
            f"[yellow]--host {host} without --api-key-env: anyone who can reach this port can use the model[/]"
        )
    limits = ServeLimits(max_body_bytes, max_concurrent_requests, max_queued_tokens)
    server_limits = ServerLimits(header_timeout, body_timeout, keep_alive_timeout, max_connections)
    serve(
        policy,
        host=host,
        port=port,
        name=served,
        api_key=key,
        limits=limits,
        adapter_dir=adapter_dir,
        server_limits=server_limits,
    )


def _api_key(value: str | None, env: str | None) -> str | None:
    """The key from ``--api-key`` or ``--api-key-env`` (never printed, not even in an error)."""
    if value is not None and env is not None:
        fail("--api-key and --api-key-env: give one of them")
    if env is not None:
        value = os.environ.get(env)
        if not value:
            fail(f"--api-key-env {env}: the environment variable {env} is not set")
    if value is not None and not value.strip():
        fail("--api-key: the key is empty")
    return value


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def register(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""
    app.command("serve")(serve_cmd)
