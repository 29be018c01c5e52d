"""CLI: ``verigym view [RUNS_DIR]`` — the browser viewer over run folders (``verigym.view``)."""

from __future__ import annotations

from pathlib import Path

import typer

from verigym._cli._server_opts import check_listen, is_loopback
from verigym._cli.common import console, fail

__all__ = ["register"]


def view_cmd(
    runs_dir: Path = typer.Argument(Path("runs"), help="Folder of run folders (default runs)."),
    port: int = typer.Option(8765, "--port", help="Port to listen on (default 8765)."),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="Address to bind: 127.0.0.1 (this machine only) unless given. Another address shows your runs to that network: "
        "a warning is printed.",
    ),
) -> None:
    """Browse runs in a web browser: run list, sample table with filters, each sample, two runs side by side, training steps."""
    folder = runs_dir.expanduser()
    if not folder.is_dir():
        fail(f"RUNS_DIR {runs_dir}: no such directory")
    check_listen(host, port)
    if not is_loopback(host):
        console.print(
            f"[yellow]warning: --host {host} is not loopback: anyone who can reach this address can read "
            f"every run under {folder} (prompts, answers, configs); the viewer has no login[/]"
        )
    from verigym._http_server import serve_forever
    from verigym.view import create_app

    shown = f"[{host}]" if ":" in host else host
    console.print(f"verigym view: {folder.resolve()} at http://{shown}:{port}/  (Ctrl-C stops it)")
    serve_forever(create_app(folder), host, port)


def register(app: typer.Typer) -> None:
    app.command("view")(view_cmd)
