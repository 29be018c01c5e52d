"""The env-server's sessions: one episode each, keyed by an id, capped, reaped when idle, and forkable.

Every surface (OpenEnv's WebSocket and HTTP routes, ORS's ``X-Session-ID`` sessions, ``/sessions/{id}``)
keeps its episodes here. All of it runs on the server's event loop, so the table needs no lock.

- ``open`` picks the task from a reset's fields and runs the harness to its first turn; past
  ``max_sessions`` live sessions it raises ``Full`` (429 with ``Retry-After``).
- ``reap`` drops sessions idle (no request, no ping) for ``idle_s``; the app runs it every few seconds.
- ``fork`` makes a new session at the same point as a live one by replaying its steps on a fresh episode
  of the same task, checking at each turn that the replay sees the messages the original saw: an
  environment whose replay differs gets a ``StepError`` (409) naming the first difference, never a
  silently different state.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from verigym.envserver._catalog import FieldError, ServedEnv, TaskRef, tool_specs
from verigym.envserver._episode import End, Episode, StepError, Turn
from verigym.envserver._wire import observation, parse_action
from verigym.types import Completion, Message, Sampling, Task

__all__ = ["Full", "Session", "SessionTable"]


class Full(Exception):
    """``max_sessions`` sessions are live."""


def _sampling(value: Any) -> Sampling:
    if value is None:
        return Sampling()
    if not isinstance(value, dict):
        raise FieldError(f"sampling must be an object of verigym Sampling fields, got {type(value).__name__}")
    try:
        return Sampling.model_validate(value)
    except ValueError as exc:
        first = exc.errors()[0] if hasattr(exc, "errors") else {}
        where = ".".join(str(p) for p in first.get("loc", ())) or "?"
        raise FieldError(f"sampling.{where}: {first.get('msg', exc)}") from None


@dataclass
class Session:
    """One episode of one task, with what the wire needs to describe it."""

    id: str
    served: ServedEnv
    ref: TaskRef
    task: Task
    episode: Episode
    episode_id: str
    details: bool
    last_seen: float = field(default_factory=time.monotonic)
    before: list[Message] | None = None
    last_step: Completion | None = None

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    @property
    def turn(self) -> int:
        return len(self.episode.steps)

    def payload(self) -> dict[str, Any]:
        """The current observation (OpenEnv's ``{observation, reward, done}``)."""
        event = self.episode.current
        assert event is not None
        return observation(
            session_id=self.id,
            ref=self.ref,
            task_id=self.task.id,
            event=event,
            before=self.before,
            step=self.last_step,
            turn=self.turn,
            tools=self.served.env.tool_schemas(),
            details=self.details,
        )

    async def step(self, action: Any) -> dict[str, Any]:
        """Take the client's step (``parse_action``'s shapes) and return the next observation; openenv's
        ``{"type": "list_tools"}`` takes no turn: the observation's ``tools`` are then MCP tools."""
        if isinstance(action, dict) and action.get("type") == "list_tools":
            self.touch()
            payload = self.payload()
            tools = [
                {"name": n, "description": d, "input_schema": p} for n, d, p in tool_specs(self.served.env)
            ]
            payload["observation"]["tools"] = tools
            return payload
        completion = parse_action(action)
        return await self.step_completion(completion)

    async def step_completion(self, completion: Completion) -> dict[str, Any]:
        self.touch()
        current = self.episode.current
        before = current.messages if isinstance(current, Turn) else None
        await self.episode.step(completion)
        self.before, self.last_step = before, completion
        self.touch()
        return self.payload()

    def state(self) -> dict[str, Any]:
        """OpenEnv's ``State``: episode id and step count, and the session's public names."""
        return {
            "episode_id": self.episode_id,
            "step_count": self.turn,
            "session_id": self.id,
            "env": self.ref.env,
            "task_id": self.task.id,
            "done": self.episode.done,
        }

    def close(self) -> None:
        self.episode.close()


class SessionTable:
    """The live sessions (module doc)."""

    def __init__(
        self, envs: dict[str, ServedEnv], *, max_sessions: int, idle_s: float, details: bool
    ) -> None:
        if not envs:
            raise ValueError("an env-server needs at least one environment")
        self.envs = envs
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self.details = details
        self.live: dict[str, Session] = {}
        self.reserved = 0

    @property
    def default(self) -> str:
        return next(iter(self.envs))

    def served(self, name: Any) -> ServedEnv:
        if name is None:
            return self.envs[self.default]
        if not isinstance(name, str) or name.lower() not in self.envs:
            raise LookupError(f"unknown environment {name!r}; this server has {', '.join(self.envs)}")
        return self.envs[name.lower()]

    def get(self, session_id: Any) -> Session:
        if not isinstance(session_id, str) or session_id not in self.live:
            raise KeyError(f"unknown session {session_id!r} (closed, reaped, or never opened)")
        found = self.live[session_id]
        found.touch()
        return found

    def _admit(self) -> None:
        if len(self.live) + self.reserved >= self.max_sessions:
            raise Full(f"this server is full ({self.max_sessions} live sessions); retry shortly")

    async def open(self, data: dict[str, Any], session_id: str | None = None) -> Session:
        """A new session on the task ``data``'s reset fields name, run to its first turn."""
        served = self.served(data.get("env"))
        ref, task = await asyncio.to_thread(served.pick, data)  # a dataset's first tasks() may read files
        sampling = _sampling(data.get("sampling"))
        episode_id = data.get("episode_id")
        if episode_id is not None and (not isinstance(episode_id, str) or len(episode_id) > 255):
            raise FieldError("episode_id must be a string of at most 255 characters")
        return await self._start(served, ref, task, sampling, session_id, episode_id)

    async def _start(
        self,
        served: ServedEnv,
        ref: TaskRef,
        task: Task,
        sampling: Sampling,
        session_id: str | None,
        episode_id: str | None,
    ) -> Session:
        self._admit()
        sid = session_id or uuid.uuid4().hex
        if sid in self.live:
            raise FieldError(f"session {sid!r} already exists")
        self.reserved += 1
        try:
            episode = Episode(served.env, task, sampling)
            session = Session(sid, served, ref, task, episode, episode_id or uuid.uuid4().hex, self.details)
            await episode.start()
        finally:
            self.reserved -= 1
        self.live[sid] = session
        return session

    def close(self, session_id: str) -> bool:
        found = self.live.pop(session_id, None)
        if found is not None:
            found.close()
        return found is not None

    def close_all(self) -> None:
        for sid in list(self.live):
            self.close(sid)

    def reap(self) -> list[str]:
        """Close the sessions idle past ``idle_s``; returns their ids."""
        now = time.monotonic()
        stale = [
            sid for sid, s in self.live.items() if now - s.last_seen > self.idle_s and not s.episode.busy
        ]
        for sid in stale:
            self.close(sid)
        return stale

    async def fork(self, session_id: str) -> Session:
        """A new session at the same point as ``session_id`` (module doc)."""
        source = self.get(session_id)
        if source.episode.busy:
            raise StepError(409, "a step of this session is running; fork it once the step has answered")
        steps, history = list(source.episode.steps), list(source.episode.history)
        target = source.episode.current
        copy = await self._start(
            source.served, source.ref, source.task, source.episode.sampling, None, source.episode_id + "-fork"
        )
        try:
            for i, completion in enumerate(steps):
                seen = copy.episode.current
                if not isinstance(seen, Turn) or seen.messages != history[i]:
                    raise StepError(
                        409,
                        f"cannot fork: replaying step {i} reached a different state ({_differs(seen, history[i])})",
                    )
                await copy.step_completion(completion)
            if not _same(copy.episode.current, target):
                want = target.messages if isinstance(target, Turn) else _end_messages(target)
                reached = copy.episode.current
                raise StepError(
                    409,
                    f"cannot fork: replaying the session's {len(steps)} steps reached a different state "
                    f"({_differs(reached if isinstance(reached, Turn) else None, want)})",
                )
        except BaseException:
            self.close(copy.id)
            raise
        copy.details = source.details
        return copy


def _same(a: Turn | End | None, b: Turn | End | None) -> bool:
    if isinstance(a, Turn) and isinstance(b, Turn):
        return a.messages == b.messages
    if isinstance(a, End) and isinstance(b, End):
        return a.trajectory.messages == b.trajectory.messages
    return False


def _end_messages(event: Turn | End | None) -> list[Message]:
    return event.trajectory.messages if isinstance(event, End) else []


def _differs(seen: Turn | End | None, want: list[Message]) -> str:
    if not isinstance(seen, Turn):
        return "the episode ended early"
    for i, (a, b) in enumerate(zip(seen.messages, want, strict=False)):
        if a != b:
            return f"message {i} differs: {a.content[:60]!r} vs {b.content[:60]!r}"
    return f"{len(seen.messages)} messages vs {len(want)}"
