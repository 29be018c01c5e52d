"""CLI: ``verigym serve MODEL_PATH`` — an OpenAI-compatible HTTP server for a local model."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import typer

from verigym._cli.common import console, fail

__all__ = ["register"]


def load_policy(model_path: str, dtype: str | None, device: str | None, max_batch_rows: int) -> Any:
    """The ``LocalPolicy`` for ``model_path`` (a directory, a hub name, or tiny/small/base for a fresh model)."""
    from verigym.policies.base import PolicyError
    from verigym.policies.default import default_policy, missing_local_path, resolve_model_dir
    from verigym.policies.local import LocalPolicy

    path = Path(model_path).expanduser()
    try:
        if path.exists():
            found = resolve_model_dir(path) if path.is_dir() else None
            if found is None:
                fail(f"MODEL_PATH {model_path}: no model here (expected config.json or adapter_config.json)")
            policy = LocalPolicy.from_pretrained(
                found, dtype=dtype, device=device, max_batch_rows=max_batch_rows
            )
        elif model_path in ("tiny", "small", "base"):
            policy, message = default_policy(model_path)
            policy.max_batch_rows = max_batch_rows
            console.print(f"[yellow]{message}[/]")
        elif missing := missing_local_path(model_path):
            fail(f"MODEL_PATH {missing}")
        else:
            policy = LocalPolicy.from_pretrained(
                model_path, dtype=dtype, device=device, max_batch_rows=max_batch_rows
            )
    except (PolicyError, ValueError) as exc:
        fail(f"MODEL_PATH {model_path}: {exc}")
    return policy


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
    dtype: str | None = typer.Option(
        None, "--dtype", help="Weights dtype: float32 (default), bfloat16, float16, auto."
    ),
    device: str | None = typer.Option(
        None, "--device", help="Device: cpu or cuda (default: cuda when available)."
    ),
    lora: list[str] = typer.Option(
        None, "--lora", help="Preload a LoRA adapter NAME=PATH (repeatable); clients use NAME as the model."
    ),
    max_batch_rows: int = typer.Option(256, "--max-batch-rows", help="Most sequences decoded in one pass."),
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="torch CPU threads (default: torch's choice; 1 is fastest for the tiny models).",
    ),
) -> None:
    """Serve a local model over the OpenAI API (chat, completions, streaming, logprobs, token ids, LoRA)."""
    if not 0 < port < 65536:
        fail(f"--port must be in 1..65535, got {port}")
    if max_batch_rows < 1:
        fail(f"--max-batch-rows must be at least 1, got {max_batch_rows}")
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
    from verigym.serve import serve

    hf_logging.disable_progress_bar()
    if threads is not None:
        torch.set_num_threads(threads)

    with console.status(f"loading {model_path}..."):
        policy = load_policy(model_path, dtype, device, max_batch_rows)
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
    serve(policy, host=host, port=port, name=served)


def register(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""
    app.command("serve")(serve_cmd)
