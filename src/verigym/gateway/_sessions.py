"""The gateway's sessions: one per rollout, each with its id, its secret key, its sampling and its record.

``Sessions`` is the table the middleware (``_router``) resolves a request's carrier against and the
handler (``_recording``) records into. It is shared by the event loop's thread (requests) and the run's
thread (``open``, ``close``, ``calls``), so every change holds its lock.

A session's key is looked up by its sha256 digest, so a lookup's timing says nothing about the keys. A
closed session is remembered by its id and key digest only (its calls and stored replies are dropped), so
a late call gets a 409 rather than a 401.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from verigym.types import Completion, Sampling

__all__ = ["Dialect", "Live", "RecordedCall", "Session", "Sessions", "Stored", "digest"]

Dialect = Literal["chat", "responses", "messages"]

_ID = re.compile(r"[A-Za-z0-9._~-]{1,128}")  # a session id is one URL path segment, unescaped


@dataclass(frozen=True)
class Session:
    """One rollout's handle: send its calls to ``base_url`` (the id in the path), or to ``plain_url``
    with ``key`` as the API key, or to ``plain_url`` with the ``X-Session-ID: id`` header."""

    id: str
    key: str = field(repr=False)
    base_url: str
    plain_url: str
    sampling: Sampling | None = None

    @property
    def anthropic_url(self) -> str:
        """``base_url`` without ``/v1``: Anthropic's clients add ``/v1/messages`` themselves
        (``ANTHROPIC_BASE_URL``)."""
        return self.base_url.removesuffix("/v1")

    @property
    def mcp_url(self) -> str:
        """The session's environment tools as an MCP server (streamable HTTP), when it was opened with
        ``tools`` (``gateway._mcp``): ``base_url`` with ``/mcp`` for ``/v1``."""
        return self.base_url.removesuffix("/v1") + "/mcp"


@dataclass(frozen=True)
class RecordedCall:
    """One sampled call of a session, as the policy produced it.

    ``index``: the session's call number (0, 1, ...; in the order sampling started; a call that failed
    before it produced a result, e.g. the client hung up, leaves its number unused). ``completion``: the
    policy's ``Completion`` (exact ``prompt_token_ids`` and ``completion_token_ids``, ``logprobs``,
    ``tool_calls``, ``finish_reason``, ``constrained``). ``messages`` and ``tools``: the request as the
    chat request had them (OpenAI format, whatever the dialect). ``started``: the wall-clock time
    (``time.time()``) sampling started; ``wall_s``: seconds until the result. ``replayed``: how many SDK
    retries were answered from this record. ``stream``: whether the call was streamed.
    """

    index: int
    dialect: Dialect
    completion: Completion
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    started: float
    wall_s: float
    replayed: int = 0
    stream: bool = False
    seed: int = 0  # the seed the row was sampled with


@dataclass
class Stored:
    """A reply kept for SDK retries: its status, headers and whole body, and the calls it recorded."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    indices: list[int]


@dataclass
class Live:
    """The gateway's state of one open session."""

    session: Session
    digest: bytes
    calls: dict[int, RecordedCall] = field(default_factory=dict)
    started: int = 0  # calls that began sampling (the next call's index)
    replies: dict[tuple[str, str, bytes], Stored] = field(default_factory=dict)
    opened: float = field(default_factory=time.time)
    task: Any = None  # the episode's task, for a policy that answers from it (an oracle)
    tools: Any = None  # the rollout's ``SessionTools``, served at /sessions/{id}/mcp (``_mcp``)

    def next_index(self) -> int:
        index, self.started = self.started, self.started + 1
        return index

    def ordered(self) -> list[RecordedCall]:
        return [self.calls[i] for i in sorted(self.calls)]


def digest(key: str | bytes) -> bytes:
    return hashlib.sha256(key.encode("utf-8") if isinstance(key, str) else key).digest()


class Sessions:
    """The open and ended sessions of one gateway."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[str, Live] = {}
        self._by_key: dict[bytes, str] = {}
        self._ended: set[str] = set()
        self._ended_keys: dict[bytes, str] = {}

    def open(
        self, url: str, sampling: Sampling | None, session_id: str | None, task: Any = None, tools: Any = None
    ) -> Session:
        sid = uuid.uuid4().hex if session_id is None else session_id
        if not _ID.fullmatch(sid):
            raise ValueError(f"session id {sid!r}: 1-128 characters of letters, digits and . _ ~ -")
        key = "vg-" + secrets.token_urlsafe(24)
        session = Session(sid, key, f"{url}/sessions/{sid}/v1", f"{url}/v1", sampling)
        with self._lock:
            if sid in self._live or sid in self._ended:
                raise ValueError(f"session id {sid!r} was used already in this gateway")
            self._live[sid] = Live(session, digest(key), task=task, tools=tools)
            self._by_key[digest(key)] = sid
        return session

    def close(self, sid: str) -> list[RecordedCall]:
        with self._lock:
            live = self._live.pop(sid, None)
            if live is None:
                raise KeyError(self._unknown(sid))
            del self._by_key[live.digest]
            self._ended.add(sid)
            self._ended_keys[live.digest] = sid
        return live.ordered()

    def calls(self, sid: str) -> list[RecordedCall]:
        with self._lock:
            live = self._live.get(sid)
            if live is None:
                raise KeyError(self._unknown(sid))
            return live.ordered()

    def _unknown(self, sid: str) -> str:
        if sid in self._ended:
            return f"session {sid!r} was closed already"
        return f"no session {sid!r} in this gateway"

    # ---- lookups for the middleware (event loop thread) -----------------------------------------

    def state(self, sid: str) -> Literal["open", "ended", "unknown"]:
        with self._lock:
            return "open" if sid in self._live else "ended" if sid in self._ended else "unknown"

    def by_key(self, key: bytes) -> tuple[str, bool] | None:
        """The session whose key is ``key`` and whether it is open; None: no session has this key."""
        d = digest(key)
        with self._lock:
            if d in self._by_key:
                return self._by_key[d], True
            if d in self._ended_keys:
                return self._ended_keys[d], False
        return None

    def live(self, sid: str) -> Live | None:
        with self._lock:
            return self._live.get(sid)

    def record(self, sid: str, call: RecordedCall) -> bool:
        """Add ``call`` to its session; False when the session ended meanwhile (nothing is kept)."""
        with self._lock:
            live = self._live.get(sid)
            if live is None:
                return False
            live.calls[call.index] = call
            return True

    def store(self, sid: str, key: tuple[str, str, bytes], reply: Stored) -> None:
        with self._lock:
            live = self._live.get(sid)
            if live is not None:
                live.replies[key] = reply

    def stored(self, sid: str, key: tuple[str, str, bytes]) -> Stored | None:
        with self._lock:
            live = self._live.get(sid)
            return None if live is None else live.replies.get(key)

    def replayed(self, sid: str, indices: list[int]) -> None:
        """Count one more retry answered from the calls ``indices`` of session ``sid``."""
        with self._lock:
            live = self._live.get(sid)
            for i in indices if live is not None else ():
                assert live is not None
                if i in live.calls:
                    live.calls[i] = dataclasses.replace(live.calls[i], replayed=live.calls[i].replayed + 1)
