"""The wire under ``verigym.envs.remote``: env-server addresses, the pool of servers, HTTP and SSE calls.

An address is ``[PROTOCOL+]http(s)://host:port[/prefix]``; several, joined by commas, are one pool of
servers that share the sessions (``_Pool``: each new session goes to the live server with the fewest
sessions open). ``PROTOCOL`` is ``openenv`` or ``ors`` (forced), else the server is probed
(``probe``).

Failures are typed so the episode loop can decide what is safe:

- ``ServerFull``: the server answered 429 (``Retry-After`` honoured) or OpenEnv's ``CAPACITY_REACHED``;
  nothing was done, so the same request may be sent again, there or elsewhere.
- ``ServerGone``: no answer (refused, reset, timed out, a closed socket, a 5xx): the server may have
  died, and may or may not have applied the request.
- ``RemoteError``: the server answered with an error that a retry would only repeat (4xx).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from verigym.types import ErrorInfo, Grade, Message

__all__: list[str] = []

PROTOCOLS = ("openenv", "ors")
_SCHEMES = ("http", "https")
MAX_RETRY_AFTER_S = 30.0  # a Retry-After longer than this is cut to it (the wait is bounded elsewhere too)


class RemoteError(Exception):
    """The server answered with an error a retry would repeat; one line."""


class ServerGone(Exception):
    """No usable answer from a server (refused, dropped, timed out, 5xx); the message says which and why."""


class ServerFull(Exception):
    """The server is full (429 / CAPACITY_REACHED): retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def is_remote_name(name: str) -> bool:
    """Whether an environment name is an env-server address (or a comma-separated list of them)."""
    first = name.split(",", 1)[0].strip()
    scheme = first.split("://", 1)[0] if "://" in first else ""
    base = scheme.rpartition("+")[2]
    return base in _SCHEMES and "://" in first


def parse_addresses(name: str) -> tuple[str | None, list[str]]:
    """``(forced protocol or None, base URLs)`` of ``name``; ``ValueError`` (one line) when malformed."""
    forced: set[str] = set()
    urls: list[str] = []
    for part in (p.strip() for p in name.split(",")):
        if not part:
            continue
        scheme, sep, rest = part.partition("://")
        if not sep:
            raise ValueError(f"env-server address {part!r} must look like http://HOST:PORT")
        proto, plus, base = scheme.rpartition("+")
        if plus and proto not in PROTOCOLS:
            raise ValueError(
                f"env-server address {part!r}: protocol {proto!r} is not one of {', '.join(PROTOCOLS)}"
            )
        if base not in _SCHEMES:
            raise ValueError(f"env-server address {part!r}: scheme must be http or https")
        url = f"{base}://{rest}".rstrip("/")
        split = urlsplit(url)
        if not split.hostname:
            raise ValueError(f"env-server address {part!r} has no host")
        try:
            split.port  # noqa: B018  (raises on a bad port)
        except ValueError:
            raise ValueError(f"env-server address {part!r} has a bad port") from None
        if split.query or split.fragment:
            raise ValueError(f"env-server address {part!r}: no query or fragment allowed")
        if plus:
            forced.add(proto)
        urls.append(url)
    if not urls:
        raise ValueError("no env-server address given")
    if len(forced) > 1:
        raise ValueError(f"env-server addresses force different protocols: {sorted(forced)}")
    if len(set(urls)) != len(urls):
        raise ValueError("an env-server address is listed twice")
    return (forced.pop() if forced else None), urls


def retry_after(headers: Mapping[str, str], default: float = 1.0) -> float:
    """Seconds to wait from a ``Retry-After`` header (seconds only; an HTTP date or junk: ``default``)."""
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        seconds = float(value) if value is not None else default
    except ValueError:
        seconds = default
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


@dataclass(frozen=True)
class Reply:
    """A whole HTTP answer (the async client's calls read the body before returning)."""

    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            raise ServerGone(f"HTTP {self.status}: the answer is not JSON: {self.text[:120]!r}") from None


def _detail(text: str) -> str:
    try:
        body = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:300]
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if not isinstance(detail, str):
        detail = json.dumps(detail)[:300]
    return " ".join(detail.split())[:300]


def check(status: int, headers: Mapping[str, str], text: str, what: str) -> None:
    """Nothing for a 2xx, else the typed failure (``what`` names the call)."""
    if 200 <= status < 300:
        return
    message = f"{what}: HTTP {status}: {_detail(text)}"
    if status == 429:
        raise ServerFull(message, retry_after(headers))
    if status >= 500:
        raise ServerGone(message)
    raise RemoteError(message)


def describe(exc: BaseException) -> str:
    """One line for a transport failure."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


async def request(
    client: aiohttp.ClientSession, method: str, url: str, what: str, *, timeout: float, **kwargs: Any
) -> Reply:
    """One HTTP call, its failures typed (a transport error or timeout is ``ServerGone``)."""
    try:
        async with client.request(
            method, url, timeout=aiohttp.ClientTimeout(total=timeout), **kwargs
        ) as response:
            body = await response.read()
            headers = {k.lower(): v for k, v in response.headers.items()}
    except TRANSPORT_ERRORS as exc:
        raise ServerGone(f"{what}: {describe(exc)}") from None
    reply = Reply(response.status, headers, body)
    check(reply.status, headers, reply.text, what)
    return reply


async def sse_events(
    client: aiohttp.ClientSession, url: str, what: str, *, timeout: float, **kwargs: Any
) -> AsyncIterator[tuple[str, str]]:
    """The ``(event, data)`` pairs of a server-sent-events answer to a POST (``timeout``: the longest
    silence between two reads)."""
    try:
        limits = aiohttp.ClientTimeout(total=None, sock_read=timeout)
        async with client.post(url, timeout=limits, **kwargs) as response:
            if not 200 <= response.status < 300:
                text = await response.text()
                check(response.status, {k.lower(): v for k, v in response.headers.items()}, text, what)
            event, data = "", list[str]()
            async for raw in response.content:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if not line:
                    if event or data:
                        yield event or "message", "\n".join(data)
                    event, data = "", []
                elif line.startswith(":"):
                    continue
                else:
                    key, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if key == "event":
                        event = value
                    elif key == "data":
                        data.append(value)
            if event or data:
                yield event or "message", "\n".join(data)
    except TRANSPORT_ERRORS as exc:
        raise ServerGone(f"{what}: {describe(exc)}") from None


@dataclass
class _Server:
    url: str
    open: int = 0  # sessions open now
    down_until: float = 0.0  # monotonic time before which no new session is sent here
    last_error: str = ""


@dataclass
class Pool:
    """The servers behind one client. New sessions go to the live server with the fewest open
    sessions (ties in turn); a server that failed is left alone for ``cooldown_s`` seconds."""

    urls: list[str]
    cooldown_s: float = 5.0
    servers: list[_Server] = field(init=False)
    _turn: int = field(init=False, default=0)
    stats: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.servers = [_Server(u) for u in self.urls]
        self.stats = {"sessions": 0, "full": 0, "failover": 0, "server_failures": 0}

    def pick(self, avoid: set[str]) -> _Server | None:
        """The server for a new session (None: every server is avoided)."""
        now = time.monotonic()
        candidates = [s for s in self.servers if s.url not in avoid]
        if not candidates:
            return None
        live = [s for s in candidates if s.down_until <= now] or candidates
        self._turn += 1
        n = len(live)
        return min(
            (live[(self._turn + i) % n] for i in range(n)), key=lambda s: s.open
        )  # fewest open, then in turn

    def failed(self, server: _Server, reason: str) -> None:
        server.down_until = time.monotonic() + self.cooldown_s
        server.last_error = reason
        self.stats["server_failures"] += 1


async def sleep_full(exc: ServerFull, deadline: float) -> None:
    """Wait out a 429 (``Retry-After``), never past ``deadline``; raise it when the deadline is reached."""
    now = time.monotonic()
    if now >= deadline:
        raise exc
    await asyncio.sleep(min(exc.retry_after or 0.05, deadline - now))


@dataclass
class Obs:
    """One answer of a session (to its opening or to a step), whatever the protocol.

    ``messages`` is the whole view the policy gets next when the server says it (verigym's servers);
    None means the conversation so far plus ``reply`` (a server that only sends what is new).
    """

    reply: list[Message]
    messages: list[Message] | None = None
    tools: list[dict[str, Any]] | None = None
    done: bool = False
    reward: float | None = None
    grades: dict[str, Grade] | None = None
    stop_reason: str | None = None
    error: ErrorInfo | None = None
    max_tokens: int | None = None
    task_id: str | None = None
    session_id: str | None = None


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else an empty one (a field a server left out or sent malformed)."""
    return value if isinstance(value, dict) else {}


def to_messages(items: Any, what: str) -> list[Message]:
    """OpenAI-format messages as ``Message``s; ``RemoteError`` naming ``what`` when one is not."""
    if not isinstance(items, list):
        raise RemoteError(f"{what}: expected a list of messages, got {type(items).__name__}")
    out = []
    for i, item in enumerate(items):
        message = Message.from_openai(item) if isinstance(item, dict) else None
        if message is None:
            raise RemoteError(f"{what}[{i}]: not a chat message the policy can take: {str(item)[:120]}")
        out.append(message)
    return out


def to_grades(raw: Any) -> dict[str, Grade] | None:
    """A server's grader vector ``{name: {"score", "error"?, "detail"?}}`` (or ``{name: float}``)."""
    if not isinstance(raw, dict):
        return None
    out: dict[str, Grade] = {}
    for name, value in raw.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[str(name)] = Grade(score=float(value))
        elif isinstance(value, dict):
            error = value.get("error")
            score = value.get("score")
            detail = str(value.get("detail") or "")
            if error:
                out[str(name)] = Grade(score=math.nan, error=str(error), detail=detail)
            elif isinstance(score, int | float) and math.isfinite(score):
                out[str(name)] = Grade(score=float(score), detail=detail)
    return out


def finite(value: Any) -> float | None:
    """``value`` as a finite float, else None (a reward the server left out or sent as junk)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def function_schema(spec: dict[str, Any]) -> dict[str, Any]:
    """An ORS/MCP tool spec (``name``, ``description``, ``input_schema``/``inputSchema``) in OpenAI's format."""
    params = spec.get("input_schema") or spec.get("inputSchema") or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {
            "name": str(spec.get("name", "")),
            "description": str(spec.get("description") or ""),
            "parameters": params,
        },
    }
