"""The flags ``verigym serve`` and ``verigym env-server`` share: the HTTP layer's limits (``--max-connections``,
``--header-timeout``, ``--body-timeout``, ``--keep-alive-timeout``, checked into one
``verigym._http_server.ServerLimits``) and the API key of ``--api-key``/``--api-key-env``; and what every
serving command (``view`` too) asks of ``--host``/``--port``: whether it can listen there, whether the
address is loopback.

The defaults are spelled here, not imported, so that ``verigym --help`` does not import the server; the
commands' tests keep them equal to ``ServerLimits``' own."""

from __future__ import annotations

import ipaddress
import os
from typing import TYPE_CHECKING, Any

import typer

from verigym._cli.common import fail

if TYPE_CHECKING:
    from verigym._http_server import ServerLimits

__all__ = [
    "BODY_TIMEOUT_S",
    "HEADER_TIMEOUT_S",
    "KEEP_ALIVE_S",
    "MAX_CONNECTIONS",
    "body_timeout_option",
    "check_listen",
    "check_seconds",
    "header_timeout_option",
    "is_loopback",
    "keep_alive_option",
    "max_connections_option",
    "resolve_api_key",
    "server_limits",
]

# ``verigym._http_server.ServerLimits``' defaults
MAX_CONNECTIONS, HEADER_TIMEOUT_S, BODY_TIMEOUT_S, KEEP_ALIVE_S = 1000, 30.0, 120.0, 5.0


def max_connections_option(help: str) -> Any:
    """``--max-connections`` (each command says what a connection is to it)."""
    return typer.Option(MAX_CONNECTIONS, "--max-connections", help=help)


def header_timeout_option() -> Any:
    """``--header-timeout``: the request line and headers' read deadline."""
    return typer.Option(
        HEADER_TIMEOUT_S,
        "--header-timeout",
        help="Seconds a client has to send a request's line and headers (408 and closed past it).",
    )


def body_timeout_option() -> Any:
    """``--body-timeout``: the request body's read deadline."""
    return typer.Option(
        BODY_TIMEOUT_S,
        "--body-timeout",
        help="Seconds a client has to send a request's body once its headers are in (closed past it).",
    )


def keep_alive_option() -> Any:
    """``--keep-alive-timeout``: how long an idle kept-alive connection stays open."""
    return typer.Option(
        KEEP_ALIVE_S, "--keep-alive-timeout", help="Seconds an idle kept-alive connection stays open."
    )


def check_seconds(*flags: tuple[str, float]) -> None:
    """One line naming the first ``(flag, seconds)`` that is not a number of seconds above 0 (NaN, inf and
    anything from 1e9 up are refused)."""
    for flag, seconds in flags:
        if not 0 < seconds < 1e9:  # NaN fails both
            fail(f"{flag} must be a number of seconds above 0, got {seconds}")


def server_limits(
    max_connections: int, header_timeout: float, body_timeout: float, keep_alive_timeout: float
) -> ServerLimits:
    """The flags' ``ServerLimits``, or one line naming the flag whose value is refused."""
    if max_connections < 1:
        fail(f"--max-connections must be at least 1, got {max_connections}")
    check_seconds(
        ("--header-timeout", header_timeout),
        ("--body-timeout", body_timeout),
        ("--keep-alive-timeout", keep_alive_timeout),
    )
    from verigym._http_server import ServerLimits

    return ServerLimits(header_timeout, body_timeout, keep_alive_timeout, max_connections)


def resolve_api_key(value: str | None, env: str | None) -> str | None:
    """The key from ``--api-key`` or ``--api-key-env`` (never printed, not even in an error); both, an unset
    variable or a blank key are one line and exit 2."""
    if value is not None and env is not None:
        fail("--api-key and --api-key-env: give one of them")
    if env is not None:
        value = os.environ.get(env)
        if not value:
            fail(f"--api-key-env {env}: the environment variable {env} is not set")
    if value is not None and not value.strip():
        fail("--api-key: the key is empty")
    return value


def check_listen(host: str, port: int) -> None:
    """One line and exit 2 unless ``port`` is a port number and ``host:port`` can be listened on now
    (``verigym._http_server.listen_error``: a port a server just left is free at once)."""
    if not 0 < port < 65536:
        fail(f"--port must be in 1..65535, got {port}")
    from verigym._http_server import listen_error

    if (why := listen_error(host, port)) is not None:
        fail(f"--host {host} --port {port}: cannot listen there ({why})")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
