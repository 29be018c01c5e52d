"""One OpenEnv session of ``verigym.envs.remote``: ``WS /ws`` (one connection per episode), or verigym's
sessionful HTTP ``POST /reset`` + ``POST /step`` (``X-Session-ID``) where the WebSocket is refused.

A verigym env-server's observation carries the whole view (``messages``, ``tools``, ``reply``, the
score when done: docs/envserver.md); any other OpenEnv server's observation is turned into one user
message (its one text field, else its JSON), and the model's reply into the action its ``/schema``
asks for (``action_field``: the one string field; else the reply must be the action's JSON).
Stock OpenEnv builds a fresh environment for each plain HTTP request, so on such a server only the
WebSocket keeps an episode; the HTTP transport is used only when ``/reset`` answers with a session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from verigym.envs._remote_wire import (
    TRANSPORT_ERRORS,
    Obs,
    RemoteError,
    ServerFull,
    ServerGone,
    _Server,
    as_dict,
    describe,
    finite,
    request,
    to_grades,
    to_messages,
)
from verigym.types import Completion, ErrorInfo, Message

__all__: list[str] = []

_META = {"reward", "done", "metadata"}
MAX_MESSAGE_BYTES = 100 * 2**20  # openenv's client allows 100 MB messages too


@dataclass
class OpenEnvWire:
    """What every OpenEnv session of one remote environment shares."""

    client: aiohttp.ClientSession
    headers: dict[str, str]
    verigym: bool  # the server speaks docs/envserver.md (messages, tools, score)
    action_field: str | None  # a foreign server: the action's one string field (None: the reply is JSON)
    transport: str  # "auto", "ws" or "http"
    open_timeout_s: float
    step_timeout_s: float


def observation_text(observation: dict[str, Any]) -> str:
    """A foreign observation as the text of one user message: its one string field, else its JSON."""
    fields = {k: v for k, v in observation.items() if k not in _META}
    strings = [v for v in fields.values() if isinstance(v, str)]
    if len(strings) == 1:
        return strings[0]
    return json.dumps(fields, sort_keys=True, default=str)


def parse_observation(data: Any, verigym: bool, what: str) -> Obs:
    """OpenEnv's ``{observation, reward, done}`` as an ``Obs``."""
    if not isinstance(data, dict) or not isinstance(data.get("observation"), dict):
        raise RemoteError(f"{what}: expected {{observation, reward, done}}, got {str(data)[:120]}")
    observation: dict[str, Any] = data["observation"]
    done = bool(data.get("done", observation.get("done", False)))
    reward = finite(data.get("reward", observation.get("reward")))
    if not (verigym and "messages" in observation):
        return Obs(
            reply=[Message(role="user", content=observation_text(observation))], done=done, reward=reward
        )
    score = as_dict(observation.get("score"))
    error = observation.get("error")
    sampling = as_dict(observation.get("sampling"))
    max_tokens = sampling.get("max_tokens")
    return Obs(
        reply=to_messages(observation.get("reply") or [], f"{what}: reply"),
        messages=to_messages(observation.get("messages"), f"{what}: messages"),
        tools=observation.get("tools") or None,
        done=done,
        reward=reward,
        grades=to_grades(score.get("grades")) if done else None,
        stop_reason=observation.get("stop_reason") if done else None,
        error=ErrorInfo(
            kind=f"remote_{error.get('kind', 'environment')}", message=str(error.get("message", ""))
        )
        if isinstance(error, dict)
        else None,
        max_tokens=max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None,
        task_id=observation.get("task_id"),
        session_id=observation.get("session_id"),
    )


def action_of(completion: Completion, wire: OpenEnvWire) -> dict[str, Any]:
    """The step's action for the model's turn."""
    if wire.verigym:
        message = completion.as_message().to_openai()
        return {
            "content": message["content"],
            "tool_calls": message.get("tool_calls", []),
            "finish_reason": completion.finish_reason,
            "usage": {
                "prompt_tokens": completion.usage.prompt_tokens,
                "completion_tokens": completion.usage.completion_tokens,
            },
        }
    if wire.action_field is not None:
        return {wire.action_field: completion.text}
    try:
        action = json.loads(completion.text)
    except ValueError:
        action = None
    if not isinstance(action, dict):
        raise RemoteError(
            "the server's action has no single string field, and the model's reply is not a JSON object "
            "(set --env-arg action_field=NAME)"
        )
    return action


class OpenEnvSession:
    """One episode on one server; ``steps_sent`` counts the steps the server may have applied."""

    def __init__(self, wire: OpenEnvWire, server: _Server) -> None:
        self.wire, self.server = wire, server
        self.steps_sent = 0
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._sid: str | None = None
        self._http = wire.transport == "http"

    @property
    def label(self) -> str:
        return f"{self.server.url} ({'HTTP' if self._http else 'WS'})"

    async def open(self, fields: dict[str, Any]) -> Obs:
        if self._http:
            return await self._http_open(fields)
        try:
            return await self._ws_open(fields)
        except _NoWebSocket as exc:
            if self.wire.transport == "ws":
                raise RemoteError(str(exc)) from None
            self._http = True
            try:
                return await self._http_open(fields)
            except RemoteError as http:
                raise RemoteError(f"{exc}, and {http}") from None

    async def step(self, completion: Completion) -> Obs:
        action = action_of(completion, self.wire)
        self.steps_sent += 1
        if self._http:
            body: dict[str, Any] = {"action": action, "session_id": self._sid}
            response = await request(
                self.wire.client,
                "POST",
                f"{self.server.url}/step",
                "POST /step",
                json=body,
                headers={**self.wire.headers, "X-Session-ID": self._sid or ""},
                timeout=self.wire.step_timeout_s,
            )
            return parse_observation(response.json(), self.wire.verigym, "POST /step")
        return await self._ws_call({"type": "step", "data": action}, "step", self.wire.step_timeout_s)

    async def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(*TRANSPORT_ERRORS, RuntimeError):
                await asyncio.wait_for(ws.send_str(json.dumps({"type": "close"})), 2.0)
            with contextlib.suppress(*TRANSPORT_ERRORS, RuntimeError):
                await asyncio.wait_for(ws.close(), 2.0)
        elif self._http and self._sid is not None:
            # verigym's HTTP sessions end on DELETE (an idle one is reaped anyway)
            with contextlib.suppress(ServerGone, RemoteError, ServerFull):
                url = f"{self.server.url}/sessions/{self._sid}"
                await request(
                    self.wire.client, "DELETE", url, "DELETE", headers=self.wire.headers, timeout=2.0
                )

    # ---- WebSocket -------------------------------------------------------------------------------

    async def _ws_open(self, fields: dict[str, Any]) -> Obs:
        url = "ws" + self.server.url[len("http") :] + "/ws"
        try:
            self._ws = await asyncio.wait_for(
                self.wire.client.ws_connect(
                    url,
                    headers=self.wire.headers,
                    max_msg_size=MAX_MESSAGE_BYTES,
                    heartbeat=20.0,  # a connection the server stopped reading is found within ~30 s
                    timeout=aiohttp.ClientWSTimeout(ws_close=2.0),
                ),
                self.wire.open_timeout_s,
            )
        except aiohttp.WSServerHandshakeError as exc:
            code = exc.status
            if code in (
                400,
                404,
                405,
                426,
            ):  # 400: a server that cannot upgrade (uvicorn without a WS library)
                raise _NoWebSocket(f"{url}: no WebSocket (HTTP {code})") from None
            if code == 429:
                raise ServerFull("WS /ws: HTTP 429", 1.0) from None
            if code >= 500:
                raise ServerGone(f"WS /ws: HTTP {code}") from None
            raise RemoteError(f"WS /ws: HTTP {code} (a wrong or missing --env-arg api_key_env?)") from None
        except TRANSPORT_ERRORS as exc:
            raise ServerGone(f"WS /ws: {describe(exc)}") from None
        return await self._ws_call({"type": "reset", "data": fields}, "reset", self.wire.open_timeout_s)

    async def _ws_call(self, message: dict[str, Any], what: str, timeout: float) -> Obs:
        ws = self._ws
        if ws is None:
            raise RemoteError(f"{what}: the session is closed")
        with contextlib.suppress(
            *TRANSPORT_ERRORS, RuntimeError
        ):  # a frame sent before a close is read below
            await ws.send_str(json.dumps(message))
        try:
            frame = await ws.receive(timeout=timeout)
        except TimeoutError:
            raise ServerGone(f"{what}: no answer in {timeout:g}s") from None
        except TRANSPORT_ERRORS as exc:
            raise ServerGone(f"{what}: {describe(exc)}") from None
        if frame.type != aiohttp.WSMsgType.TEXT:
            error = ws.exception()
            cause = describe(error) if error is not None else f"{frame.type.name}, code {ws.close_code}"
            raise ServerGone(f"{what}: the connection closed ({cause})")
        try:
            answer = json.loads(frame.data)
        except ValueError:
            raise ServerGone(f"{what}: the answer is not JSON") from None
        kind = answer.get("type") if isinstance(answer, dict) else None
        if kind == "error":
            data = answer.get("data") or {}
            code, text = data.get("code", ""), data.get("message", "")
            if code == "CAPACITY_REACHED":
                raise ServerFull(f"{what}: CAPACITY_REACHED: {text}", 1.0)
            raise RemoteError(f"{what}: {code}: {text}")
        if kind != "observation":
            raise RemoteError(f"{what}: expected an observation, got {str(answer)[:120]}")
        return parse_observation(answer.get("data"), self.wire.verigym, what)

    # ---- HTTP (verigym's sessions) ---------------------------------------------------------------

    async def _http_open(self, fields: dict[str, Any]) -> Obs:
        response = await request(
            self.wire.client,
            "POST",
            f"{self.server.url}/reset",
            "POST /reset",
            json=fields,
            headers=self.wire.headers,
            timeout=self.wire.open_timeout_s,
        )
        obs = parse_observation(response.json(), self.wire.verigym, "POST /reset")
        self._sid = response.headers.get("x-session-id") or obs.session_id
        if not self._sid:
            raise RemoteError(
                f"{self.server.url}: no WebSocket, and POST /reset keeps no session (a stock OpenEnv server "
                "builds a fresh environment per HTTP request)"
            )
        return obs


class _NoWebSocket(Exception):
    """The server has no ``WS /ws``."""
