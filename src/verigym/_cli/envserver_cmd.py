"""CLI: ``verigym env-server ENV [ENV...]`` — serve environments over HTTP in OpenEnv's and the Open Reward
Standard's protocols (``docs/envserver.md``)."""

from __future__ import annotations

import typer

from verigym._cli._server_opts import (
    body_timeout_option,
    check_listen,
    check_seconds,
    header_timeout_option,
    keep_alive_option,
    max_connections_option,
    resolve_api_key,
    server_limits,
)
from verigym._cli.common import EnvArg, console, fail, parse_kv

__all__ = ["register"]

MAX_BODY_BYTES = 8 * 1024 * 1024  # ``verigym.envserver._app.MAX_BODY_BYTES``, spelled here for a fast --help


def env_server_cmd(
    envs: list[str] = typer.Argument(
        ..., help="Environments to serve: registered names (verigym envs), module:attr or file.py:attr."
    ),
    port: int = typer.Option(8011, "--port", help="Port to listen on."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to bind (0.0.0.0 to accept remote clients: set an API key)."
    ),
    env_arg: EnvArg = None,
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        help="Require the key as 'Authorization: Bearer KEY' or 'X-API-Key: KEY' on every route except "
        "/health (401 otherwise; a WebSocket is closed with 1008). A key on the command line shows in the "
        "process list: prefer --api-key-env.",
    ),
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", help="Read the API key (as --api-key) from this environment variable."
    ),
    max_sessions: int = typer.Option(
        256, "--max-sessions", help="Most live sessions (episodes); past it 429 with Retry-After."
    ),
    session_timeout: float = typer.Option(
        900.0,
        "--session-timeout",
        help="Seconds a session may idle (no request, no ping) before it is closed.",
    ),
    max_body_bytes: int = typer.Option(
        MAX_BODY_BYTES,
        "--max-body-bytes",
        help="Largest request body or WebSocket message (default 8 MiB); a larger body gets 413 unread.",
    ),
    max_connections: int = max_connections_option(
        "Most open connections (WebSockets included); past it a new one gets 503 with Retry-After."
    ),
    header_timeout: float = header_timeout_option(),
    body_timeout: float = body_timeout_option(),
    keep_alive_timeout: float = keep_alive_option(),
    share_grade_details: bool = typer.Option(
        False,
        "--share-grade-details",
        help="Send each grade's detail text with the score (off: details can quote the hidden answer).",
    ),
) -> None:
    """Serve environments to remote trainers in OpenEnv's and the Open Reward Standard's protocols."""
    for flag, value in (("--max-sessions", max_sessions), ("--max-body-bytes", max_body_bytes)):
        if value < 1:
            fail(f"{flag} must be at least 1, got {value}")
    check_seconds(("--session-timeout", session_timeout))
    limits = server_limits(max_connections, header_timeout, body_timeout, keep_alive_timeout)
    key = resolve_api_key(api_key, api_key_env)
    kwargs = parse_kv(env_arg, "--env-arg")
    check_listen(host, port)

    from verigym.envs.base import Environment
    from verigym.envs.registry import load_env
    from verigym.envserver import create_app, serve_envs

    loaded: dict[str, Environment] = {}
    for name in envs:
        try:
            env = load_env(name, **kwargs)
        except Exception as exc:  # unknown name or a bad --env-arg: the registry's message is one line
            fail(f"environment {name!r}: {exc}")
        if not isinstance(env, Environment):
            fail(f"environment {name!r} is a {type(env).__name__}, not a verigym Environment")
        served = (env.name if ":" in name else name).lower()
        if served in loaded:
            fail(f"environment {name!r} is given twice (served as {served!r})")
        loaded[served] = env
    app = create_app(
        loaded,
        api_key=key,
        max_sessions=max_sessions,
        idle_s=session_timeout,
        max_body_bytes=max_body_bytes,
        share_grade_details=share_grade_details,
    )
    shown = f"[{host}]" if ":" in host else host
    console.print(
        f"serving {', '.join(loaded)} on http://{shown}:{port} (OpenEnv: /ws /reset /step; "
        f"ORS: /list_environments /{{env}}/call){'; API key required' if key else ''}"
    )
    serve_envs(app, host, port, max_body_bytes, limits)


def register(app: typer.Typer) -> None:
    app.command("env-server")(env_server_cmd)
