"""An environment served over HTTP by someone else: ``load_env("http://HOST:PORT")``.

The policy stays here (so token ids stay exact); the environment's harness, tools and rubric run on
the server, and the reward (and grader vector, when the server sends one) comes from it. Two public
protocols, either one per address:

- **OpenEnv** (``WS /ws``, one connection per episode; verigym's sessionful HTTP ``/reset`` +
  ``/step`` where the WebSocket is refused), and
- **the Open Reward Standard** (``X-Session-ID`` sessions, ``/{env}/prompt``, tool calls streamed back).

The protocol is forced by the address (``openenv+http://…``, ``ors+http://…``) or ``protocol=``; else
the server is asked: ``GET /schema`` answering is OpenEnv (preferred), else ``GET /list_environments``
is ORS. verigym's own ``env-server`` speaks both (docs/envserver.md). Tasks come from the task API
(``/{env}/task_range``, with ``seed`` where the server takes it) where the server has one, so their
ids and prompts are the served environment's; otherwise (a stock OpenEnv environment) task ``i`` is a
reset with a seed derived from ``(seed, split, i)``.

**Several servers**: ``"http://a:1,http://b:2"`` is one pool; each new session goes to the live server
with the fewest open sessions. **Failures**: a server that is full (429 + ``Retry-After``, or
``CAPACITY_REACHED``) is waited on (its ``Retry-After``) or skipped for another, up to ``full_wait_s``.
A server that fails before the episode's first step is replaced by another at once (nothing was
applied). After a step, a failure is retried elsewhere only by replay (``replay=True``, the default):
a fresh session of the same task on another server (the same server when no other answers: a
connection that dropped while its server lives) gets the episode's steps again, and each answer must
match the one recorded, else the sample errors; the failed session is closed and not used again. An unrecoverable failure is an errored sample (``kind="env_server"``, the server and reason),
never a zero; ``verigym eval --resume`` reruns it.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from verigym.envs._remote_meta import Probe, ServerRubric, list_tasks, probe
from verigym.envs._remote_openenv import OpenEnvSession, OpenEnvWire
from verigym.envs._remote_ors import OrsSession, OrsWire
from verigym.envs._remote_wire import (
    Obs,
    Pool,
    RemoteError,
    ServerFull,
    ServerGone,
    is_remote_name,
    parse_addresses,
    sleep_full,
)
from verigym.envs.base import Environment
from verigym.envs.registry import EnvArgError
from verigym.policies.base import Policy, PolicyError
from verigym.types import Completion, ErrorInfo, Message, Sampling, Task, Trajectory, Turn

__all__ = ["RemoteEnv", "is_remote_name"]

Session = OpenEnvSession | OrsSession


class RemoteEnv(Environment):
    """An environment on one or more env-servers (see the module doc)."""

    def __init__(
        self,
        address: str,
        *,
        protocol: str | None = None,
        env: str | None = None,
        transport: str = "auto",
        api_key_env: str | None = None,
        max_turns: int = 64,
        replay: bool = True,
        full_wait_s: float = 300.0,
        open_timeout_s: float = 30.0,
        step_timeout_s: float = 600.0,
        action_field: str | None = None,
        size: int = 1000,
    ) -> None:
        super().__init__(rubric=ServerRubric())
        try:
            forced, urls = parse_addresses(address)
        except ValueError as exc:
            raise EnvArgError(str(exc)) from None
        if protocol is not None and protocol not in ("openenv", "ors"):
            raise EnvArgError(f"protocol must be 'openenv' or 'ors', got {protocol!r}")
        if forced and protocol and forced != protocol:
            raise EnvArgError(f"the address says {forced} and protocol= says {protocol}")
        if transport not in ("auto", "ws", "http"):
            raise EnvArgError(f"transport must be 'auto', 'ws' or 'http', got {transport!r}")
        for key, value in (("max_turns", max_turns), ("size", size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise EnvArgError(f"{key} must be an integer >= 1, got {value!r}")
        for key, number in (
            ("full_wait_s", full_wait_s),
            ("open_timeout_s", open_timeout_s),
            ("step_timeout_s", step_timeout_s),
        ):
            if isinstance(number, bool) or not isinstance(number, int | float) or not number > 0:
                raise EnvArgError(f"{key} must be a number > 0, got {number!r}")
        self.headers: dict[str, str] = {}
        if api_key_env is not None:
            secret = os.environ.get(api_key_env)
            if not secret:
                raise EnvArgError(f"api_key_env: the environment variable {api_key_env} is not set")
            self.headers = {"Authorization": f"Bearer {secret}", "X-API-Key": secret}
        self.pool = Pool(urls)
        self.info: Probe = probe(urls, forced or protocol, env, self.headers, open_timeout_s)
        self.protocol = self.info.protocol
        self.transport, self.max_turns, self.replay, self.size = transport, max_turns, bool(replay), size
        self.full_wait_s, self.open_timeout_s, self.step_timeout_s = (
            full_wait_s,
            open_timeout_s,
            step_timeout_s,
        )
        self.action_field = action_field or self.info.action_field
        self.name = f"{self.info.env or 'remote'}@{urls[0]}" + (f"+{len(urls) - 1}" if len(urls) > 1 else "")
        self.description = self.info.description or f"an environment served at {', '.join(urls)}"
        self._clients: dict[int, _Client] = {}  # by event loop

    # ---- tasks -----------------------------------------------------------------------------------

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return list_tasks(
            self.pool.urls, self.info, self.headers, n, seed, split, self.open_timeout_s, self.size
        )

    # ---- clients ---------------------------------------------------------------------------------

    def _client(self) -> aiohttp.ClientSession:
        """This event loop's HTTP client, shared by the loop's rollouts (made by the first, closed by the
        last to end: a trainer that runs each step in a new loop leaves no client open)."""
        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is None or entry.session.closed:
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
            entry = self._clients[id(loop)] = _Client(
                aiohttp.ClientSession(connector=connector, trust_env=False)
            )
        return entry.session

    def _enter(self) -> None:
        self._client()
        self._clients[id(asyncio.get_running_loop())].users += 1

    async def _leave(self) -> None:
        key = id(asyncio.get_running_loop())
        entry = self._clients.get(key)
        if entry is not None:
            entry.users -= 1
            if entry.users <= 0:
                del self._clients[key]
                await entry.session.close()

    async def aclose(self) -> None:
        """Close this event loop's HTTP client (``verigym.evaluate`` calls it at the end of a run)."""
        entry = self._clients.pop(id(asyncio.get_running_loop()), None)
        if entry is not None:
            await entry.session.close()

    def _session(self, server: Any) -> Session:
        client = self._client()
        if self.protocol == "openenv":
            wire = OpenEnvWire(
                client,
                self.headers,
                self.info.verigym,
                self.action_field,
                self.transport,
                self.open_timeout_s,
                self.step_timeout_s,
            )
            return OpenEnvSession(wire, server)
        ors = OrsWire(
            client,
            self.headers,
            self.info.env or "",
            self.info.verigym,
            self.open_timeout_s,
            self.step_timeout_s,
        )
        return OrsSession(ors, server)

    def _fields(self, task: Task, sampling: Sampling) -> dict[str, Any]:
        ref = dict(task.info.get("remote") or {})
        if self.protocol == "ors":
            if self.info.verigym and "spec" in ref:
                return {"task_spec": ref["spec"]}
            return {"split": ref.get("split", "test"), "index": ref.get("index", 0)}
        if not self.info.verigym:
            return {"seed": ref.get("reset_seed", 0)}
        fields = {k: ref[k] for k in ("split", "seed", "index") if k in ref}
        fields["sampling"] = sampling.model_dump(mode="json", exclude={"n"})
        if self.info.env:
            fields["env"] = self.info.env
        return fields

    # ---- sessions with failover ------------------------------------------------------------------

    async def _open(self, task: Task, sampling: Sampling, avoid: set[str]) -> tuple[Session, Obs]:
        """A session of ``task`` on the best server not in ``avoid``: a full server is waited on or
        skipped, an unreachable one is replaced (reasons collected for the error)."""
        deadline = time.monotonic() + self.full_wait_s
        failures: list[str] = []
        full: dict[str, ServerFull] = {}
        fields = self._fields(task, sampling)
        while True:
            server = self.pool.pick(avoid | set(full))
            if server is None:
                if not full:
                    raise ServerGone("no env-server could open the session: " + "; ".join(failures))
                await sleep_full(min(full.values(), key=lambda e: e.retry_after), deadline)
                full.clear()
                continue
            session = self._session(server)
            server.open += 1
            try:
                obs = await session.open(fields)
            except ServerFull as exc:
                self.pool.stats["full"] += 1
                full[server.url] = exc
            except ServerGone as exc:
                self.pool.failed(server, str(exc))
                avoid = avoid | {server.url}
                failures.append(f"{server.url}: {exc}")
            else:
                self.pool.stats["sessions"] += 1
                want = task.info.get("remote", {}).get("id")
                if obs.task_id is not None and want is not None and obs.task_id != want:
                    await self._close(session)
                    raise RemoteError(f"{server.url} opened task {obs.task_id!r}, not {want!r}")
                return session, obs
            await self._close(session)

    async def _close(self, session: Session) -> None:
        session.server.open -= 1
        await session.close()

    async def _step(self, session: Session, completion: Completion) -> Obs:
        """One step; a 429 (nothing applied) is waited out and sent again."""
        deadline = time.monotonic() + self.full_wait_s
        while True:
            try:
                return await session.step(completion)
            except ServerFull as exc:
                self.pool.stats["full"] += 1
                session.steps_sent -= 1
                await sleep_full(exc, deadline)

    async def _failover(
        self,
        task: Task,
        sampling: Sampling,
        session: Session,
        reason: ServerGone,
        done: list[tuple[Completion, Obs]],
        first: Obs,
    ) -> Session:
        """A session on another server at the same point: re-opened (before the first step) or replayed."""
        self.pool.failed(session.server, str(reason))
        await self._close(session)
        if done and not self.replay:
            raise ServerGone(f"{session.label} failed after {len(done)} step(s): {reason} (replay is off)")
        self.pool.stats["failover"] += 1
        try:
            fresh, obs = await self._open(task, sampling, {session.server.url})
        except ServerGone:
            try:  # no other server: the same one, whose connection may have dropped while it lives on
                fresh, obs = await self._open(task, sampling, set())
            except ServerGone as exc:
                raise ServerGone(f"{session.label} failed ({reason}), and {exc}") from None
        try:
            if _view(obs) != _view(first):
                raise RemoteError(f"{fresh.label} opened the task with another prompt")
            for i, (completion, answer) in enumerate(done):
                obs = await self._step(fresh, completion)
                if _view(obs) != _view(answer) or obs.done != answer.done:
                    raise RemoteError(f"{fresh.label} answered step {i + 1} of the replay differently")
        except (RemoteError, ServerGone) as exc:
            await self._close(fresh)
            raise ServerGone(
                f"{session.label} failed ({reason}); replay on another server failed: {exc}"
            ) from None
        return fresh

    # ---- one episode -----------------------------------------------------------------------------

    async def rollout(self, task: Task, policy: Policy, sampling: Sampling) -> Trajectory:
        trajectory = Trajectory(task_id=task.id, prompt=list(task.prompt), started_at=time.time())
        start = time.perf_counter()
        state: dict[str, Any] = {"protocol": self.protocol}
        session: Session | None = None
        self._enter()
        try:
            session, first = await self._open(task, sampling, set())
            await self._episode(task, policy, sampling, trajectory, state, session, first)
        except PolicyError as exc:
            trajectory.stop_reason, trajectory.error = "error", ErrorInfo(kind=exc.kind, message=str(exc))
        except (ServerGone, ServerFull) as exc:
            trajectory.stop_reason, trajectory.error = "error", ErrorInfo(kind="env_server", message=str(exc))
        except RemoteError as exc:
            trajectory.stop_reason, trajectory.error = "error", ErrorInfo(kind="env_server", message=str(exc))
        finally:
            session = state.pop("_session", session)
            if session is not None:
                await self._close(session)
            await self._leave()
        trajectory.wall_s = time.perf_counter() - start
        trajectory.state = state
        return trajectory

    async def _episode(
        self,
        task: Task,
        policy: Policy,
        sampling: Sampling,
        trajectory: Trajectory,
        state: dict[str, Any],
        session: Session,
        first: Obs,
    ) -> None:
        state["_session"] = session
        prompt = first.messages if first.messages is not None else first.reply
        trajectory.prompt = list(prompt)
        history: list[Message] = list(prompt)
        obs, tools, rewards = first, first.tools, []
        done: list[tuple[Completion, Obs]] = []
        trajectory.stop_reason = "max_turns"
        for _ in range(self.max_turns):
            view = obs.messages if obs.messages is not None else history
            budget = sampling
            if obs.max_tokens is not None and obs.max_tokens < sampling.max_tokens:
                budget = sampling.model_copy(update={"max_tokens": obs.max_tokens})
            completion = await policy.complete(view, tools=tools, sampling=budget)
            trajectory.turns.append(
                Turn(source="model", messages=[completion.as_message()], completion=completion)
            )
            history.append(completion.as_message())
            while True:
                try:
                    obs = await self._step(session, completion)
                    break
                except ServerGone as exc:
                    session = await self._failover(task, sampling, session, exc, done, first)
                    state["_session"] = session
                    state["failovers"] = state.get("failovers", 0) + 1
            done.append((completion, obs))
            if obs.reply:
                trajectory.turns.append(Turn(source="env", messages=list(obs.reply)))
                history.extend(obs.reply)
            if obs.reward is not None:
                rewards.append(obs.reward)
            if obs.tools is not None:
                tools = obs.tools
            if obs.done:
                trajectory.stop_reason = obs.stop_reason if obs.stop_reason in _STOPS else "done"  # type: ignore[assignment]
                break
        if obs.error is not None:
            trajectory.stop_reason, trajectory.error = "error", obs.error
        state.update(
            server=session.server.url,
            steps=len(done),
            reward=sum(rewards) if rewards else None,
            grades={
                k: {"score": g.score if g.ok else None, "error": g.error, "detail": g.detail}
                for k, g in (obs.grades or {}).items()
            },
        )


@dataclass
class _Client:
    session: aiohttp.ClientSession
    users: int = 0


_STOPS = ("done", "max_turns", "max_tokens", "length", "timeout", "error", "truncated")


def _view(obs: Obs) -> list[Message]:
    return list(obs.messages) if obs.messages is not None else list(obs.reply)
