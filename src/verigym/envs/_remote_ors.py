"""One Open Reward Standard session of ``verigym.envs.remote``: ``POST /create`` (``X-Session-ID``), the
prompt and the tools, then one ``POST /{env}/call`` (server-sent events) per tool call of the model.

The model's turn is mapped onto tools: each tool call it makes is one ``call`` (its result is the tool
message the model reads next); a reply without tool calls is sent to verigym's ``answer`` tool where
the server has it (docs/envserver.md: the plain reply; hidden from the policy), and otherwise ends
the episode (ORS has no step for plain text). A ``reward`` in any tool output counts; ``finished``
ends the episode. A session is pinged while it lives (the server reaps idle ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

import aiohttp

from verigym.envs._remote_wire import (
    Obs,
    RemoteError,
    ServerFull,
    ServerGone,
    _Server,
    as_dict,
    finite,
    function_schema,
    request,
    sse_events,
    to_grades,
)
from verigym.types import Completion, Message, ToolCall

__all__: list[str] = []

ANSWER_TOOLS = ("answer", "final_answer")


@dataclass
class OrsWire:
    """What every ORS session of one remote environment shares."""

    client: aiohttp.ClientSession
    headers: dict[str, str]
    env: str  # the environment's name on the server
    verigym: bool  # the server is a verigym env-server (its ``answer`` tool takes plain replies)
    open_timeout_s: float
    step_timeout_s: float
    ping_s: float = 30.0


def prompt_messages(blocks: Any) -> list[Message]:
    """``GET /{env}/prompt`` blocks as messages: one per block with a ``detail.role`` (verigym's), else
    the text blocks joined into one user message (an image block is named, not shown)."""
    if not isinstance(blocks, list):
        raise RemoteError(f"GET /prompt: expected a list of blocks, got {str(blocks)[:120]}")
    roles = [as_dict(as_dict(b).get("detail")).get("role") for b in blocks]
    if blocks and all(r in ("system", "user", "assistant") for r in roles):
        return [
            Message.model_validate({"role": r, "content": str(b.get("text", ""))})
            for r, b in zip(roles, blocks, strict=True)
        ]
    return [Message(role="user", content=blocks_text(blocks))]


def blocks_text(blocks: Any) -> str:
    parts = []
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict):
            parts.append(f"[{block.get('type', 'block')} {block.get('mimeType', '')}]".replace(" ]", "]"))
    return "\n".join(parts)


class OrsSession:
    """One episode on one server; ``steps_sent`` counts the calls the server may have applied."""

    def __init__(self, wire: OrsWire, server: _Server) -> None:
        self.wire, self.server = wire, server
        self.steps_sent = 0
        self.sid = str(uuid.uuid4())
        self._headers = {**wire.headers, "X-Session-ID": self.sid}
        self._answer: str | None = None
        self._ping: asyncio.Task[None] | None = None
        self._created = False

    @property
    def label(self) -> str:
        return f"{self.server.url} (ORS)"

    def _url(self, path: str) -> str:
        return f"{self.server.url}{path}"

    async def open(self, fields: dict[str, Any]) -> Obs:
        """``fields``: ``task_spec`` or ``split`` + ``index`` (``CreateSession``), ``env_name`` added."""
        body = {"env_name": self.wire.env, **fields}
        client, timeout = self.wire.client, self.wire.open_timeout_s
        await request(
            client,
            "POST",
            self._url("/create"),
            "POST /create",
            json=body,
            headers=self._headers,
            timeout=timeout,
        )
        self._created = True
        env = f"/{self.wire.env}"
        prompt = await request(
            client, "GET", self._url(f"{env}/prompt"), "GET /prompt", headers=self._headers, timeout=timeout
        )
        tools = await request(
            client,
            "GET",
            self._url(f"{env}/task_tools"),
            "GET /task_tools",
            headers=self._headers,
            timeout=timeout,
        )
        specs = tools.json().get("tools") or []
        names = {str(s.get("name")) for s in specs}
        if self.wire.verigym:  # the plain-reply tool: the one the environment's own tools leave free
            self._answer = next((n for n in reversed(ANSWER_TOOLS) if n in names), None)
        offered = [function_schema(s) for s in specs if s.get("name") != self._answer]
        self._ping = asyncio.create_task(self._pinger())
        return Obs(reply=prompt_messages(prompt.json()), tools=offered or None)

    async def step(self, completion: Completion) -> Obs:
        calls = list(completion.tool_calls)
        if not calls:
            if self._answer is None:  # a plain reply ends the episode; no tool was called for it
                return Obs(reply=[], done=True)
            calls = [
                ToolCall(id="answer", name=self._answer, arguments=json.dumps({"content": completion.text}))
            ]
        reply: list[Message] = []
        obs = Obs(reply=reply)
        rewards: list[float] = []
        for call in calls:
            try:
                arguments = call.parsed_arguments()
            except ValueError as exc:  # the model's mistake, told to it as the tool's answer
                reply.append(
                    Message(role="tool", content=f"Error: {exc}", tool_call_id=call.id, name=call.name)
                )
                continue
            self.steps_sent += 1
            output = await self._call(call.name, arguments)
            if not output.get("ok", False):
                text = f"Error: {output.get('error', 'the tool failed')}"
                reply.append(Message(role="tool", content=text, tool_call_id=call.id, name=call.name))
                continue
            result = as_dict(output.get("output"))
            if call.name != self._answer:
                reply.append(
                    Message(
                        role="tool",
                        content=blocks_text(result.get("blocks")),
                        tool_call_id=call.id,
                        name=call.name,
                    )
                )
            reward = finite(result.get("reward"))
            if reward is not None:
                rewards.append(reward)
            if result.get("finished"):
                metadata = as_dict(result.get("metadata"))
                score = as_dict(metadata.get("score"))
                obs.done = True
                obs.grades = to_grades(score.get("grades"))
                stop = metadata.get("stop_reason")
                obs.stop_reason = stop if isinstance(stop, str) else None
                break
        obs.reward = sum(rewards) if rewards else None
        return obs

    async def _call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One tool call; a dropped stream is resumed once by its ``task_id`` (the server keeps the result)."""
        body: dict[str, Any] = {"name": name, "input": arguments}
        for attempt in range(2):
            chunks: list[str] = []
            try:
                async for event, data in sse_events(
                    self.wire.client,
                    self._url(f"/{self.wire.env}/call"),
                    f"POST /call {name}",
                    json=body,
                    headers={**self._headers, "Accept": "text/event-stream"},
                    timeout=self.wire.step_timeout_s,
                ):
                    if event == "task_id":
                        body["task_id"] = data.strip()
                    elif event == "chunk":
                        chunks.append(data)
                    elif event == "end":
                        chunks.append(data)
                        return _json_object("".join(chunks), name)
                    elif event == "error":
                        return {"ok": False, "error": data or "the call failed"}
                raise ServerGone(f"POST /call {name}: the stream ended without a result")
            except ServerGone:
                if attempt == 1 or "task_id" not in body:
                    raise
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._ping is not None:
            self._ping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ping
        if self._created:
            with contextlib.suppress(ServerGone, RemoteError, ServerFull):
                await request(
                    self.wire.client,
                    "POST",
                    self._url("/delete"),
                    "POST /delete",
                    headers=self._headers,
                    timeout=2.0,
                )

    async def _pinger(self) -> None:
        while True:
            await asyncio.sleep(self.wire.ping_s)
            with contextlib.suppress(ServerGone, RemoteError, ServerFull):
                await request(
                    self.wire.client,
                    "POST",
                    self._url("/ping"),
                    "POST /ping",
                    headers=self._headers,
                    timeout=5.0,
                )


def _json_object(text: str, name: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise ServerGone(f"POST /call {name}: the result is not JSON") from None
    if not isinstance(value, dict):
        raise RemoteError(f"POST /call {name}: the result is not a JSON object")
    return value
