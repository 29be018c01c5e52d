"""The Open Reward Standard surface of ``verigym env-server`` (``ors-sdk`` 0.1.0's ``ors.server`` shapes).

Task listing per environment (``/{env}/splits``, ``tasks``, ``num_tasks``, ``task``, ``task_range``, with
public task specs only), sessions keyed by ``X-Session-ID`` (``/create_session`` as SSE, ``/create``,
``/ping``, ``/delete``, ``/delete_session``), ``/{env}/prompt``, ``/{env}/tools`` and ``task_tools`` (the
environment's tools plus ``answer``: the model's plain reply), and ``/{env}/call`` streamed as SSE
(``task_id``, ``chunk``…, ``end`` carrying ``RunToolOutput`` JSON in 4096-character pieces; a re-POST with
the same ``task_id`` resumes; results linger 60 s). ``docs/envserver.md`` has the mapping.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import StreamingResponse

from verigym.envserver._catalog import FieldError, ServedEnv, TaskRef, public_task, tool_specs
from verigym.envserver._episode import StepError
from verigym.envserver._errors import http_error, read_json
from verigym.envserver._sessions import Full, Session, SessionTable
from verigym.types import Completion, Task, ToolCall

__all__ = ["add_ors_routes", "answer_tool_name"]

CHUNK = 4096
MAX_LISTED = 100_000  # the most task specs one listing returns
LINGER_S = 60.0
HEARTBEAT_S = 10.0
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def answer_tool_name(served: ServedEnv) -> str:
    """``answer``, or ``final_answer`` when the environment has its own ``answer`` tool."""
    names = {name for name, _, _ in tool_specs(served.env)}
    return "final_answer" if "answer" in names else "answer"


def _tools(served: ServedEnv) -> dict[str, Any]:
    tools = [{"name": n, "description": d, "input_schema": p} for n, d, p in tool_specs(served.env)]
    tools.append(
        {
            "name": answer_tool_name(served),
            "description": "Reply to the task with your answer (your turn's text, with no tool call).",
            "input_schema": {
                "type": "object",
                "properties": {"content": {"type": "string", "description": "Your reply."}},
                "required": ["content"],
            },
        }
    )
    return {"tools": tools}


def _sse(event: str, data: str) -> bytes:
    lines = "".join(f"data: {line}\r\n" for line in (data.split("\n") if data else [""]))
    return f"event: {event}\r\n{lines}\r\n".encode()


_SID = re.compile(r"[A-Za-z0-9._~:-]{1,128}")


def _sid(request: Request) -> str:
    sid = request.headers.get("x-session-id", "").strip()
    if not sid:
        raise HTTPException(400, "X-Session-ID header is required")
    if not _SID.fullmatch(sid):
        raise HTTPException(400, "X-Session-ID must be 1-128 characters of letters, digits and ._~:-")
    return sid


def _seed(body: dict[str, Any]) -> int:
    seed = body.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise HTTPException(400, f"seed must be a non-negative integer, got {seed!r}")
    return seed


class _Calls:
    """Running and finished tool calls by task id (a client re-POSTs a task id to resume its stream)."""

    def __init__(self) -> None:
        self.tasks: dict[str, asyncio.Task[str]] = {}
        self.done_at: dict[str, float] = {}

    def start(self, work: Any) -> str:
        self._evict()
        task_id = uuid.uuid4().hex
        task = asyncio.get_running_loop().create_task(work)
        task.add_done_callback(lambda _: self.done_at.setdefault(task_id, time.monotonic()))
        self.tasks[task_id] = task
        return task_id

    def _evict(self) -> None:
        now = time.monotonic()
        for task_id in [t for t, at in self.done_at.items() if now - at > LINGER_S]:
            self.tasks.pop(task_id, None)
            self.done_at.pop(task_id, None)

    async def stream(self, task_id: str, request: Request) -> AsyncIterator[bytes]:
        task = self.tasks.get(task_id)
        if task is None:
            yield _sse("error", "unknown task_id")
            return
        yield _sse("task_id", task_id)
        while not task.done():
            done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_S)
            if not done:
                if await request.is_disconnected():
                    return
                yield b": ping\r\n\r\n"
        if task.cancelled():
            yield _sse("error", "the call was cancelled (its session closed)")
            return
        exc = task.exception()
        if exc is not None:
            yield _sse("error", f"{type(exc).__name__}: {exc}")
            return
        result = task.result()
        for i in range(0, len(result), CHUNK):
            yield _sse("end" if i + CHUNK >= len(result) else "chunk", result[i : i + CHUNK])


def _tool_output(payload: dict[str, Any]) -> str:
    obs = payload["observation"]
    blocks = [{"type": "text", "text": m.get("content") or ""} for m in obs["reply"]]
    metadata: dict[str, Any] = {"turn": obs["turn"]}
    if payload["done"]:
        metadata.update(stop_reason=obs["stop_reason"], score=obs["score"], error=obs["error"])
        if not blocks:
            blocks = [{"type": "text", "text": f"The episode is over ({obs['stop_reason']})."}]
    output = {
        "blocks": blocks,
        "metadata": metadata,
        "reward": payload["reward"],
        "finished": payload["done"],
    }
    return json.dumps({"ok": True, "output": output})


async def _run_call(session: Session, name: str, tool_input: dict[str, Any]) -> str:
    served = session.served
    if name == answer_tool_name(served):
        content = tool_input.get("content", "")
        if not isinstance(content, str):
            return json.dumps({"ok": False, "error": "answer: input.content must be a string"})
        completion = Completion(text=content)
    elif name in {n for n, _, _ in tool_specs(served.env)}:
        call = ToolCall(id=f"call-{session.turn}", name=name, arguments=json.dumps(tool_input))
        completion = Completion(tool_calls=(call,), finish_reason="tool_calls")
    else:
        return json.dumps({"ok": False, "error": f"{name!r} is not a valid tool"})
    try:
        payload = await session.step_completion(completion)
    except StepError as exc:
        return json.dumps({"ok": False, "error": str(exc)})
    return _tool_output(payload)


def add_ors_routes(app: FastAPI, table: SessionTable) -> None:
    """Register the ORS routes on ``app`` (module doc)."""
    calls = _Calls()

    def served(env_name: str) -> ServedEnv:
        try:
            return table.served(env_name)
        except LookupError as exc:
            http_error(exc)

    def session_of(request: Request) -> Session:
        try:
            return table.get(_sid(request))
        except KeyError:
            raise HTTPException(404, "Active environment not found") from None

    async def split_body(request: Request, env_name: str) -> tuple[ServedEnv, dict[str, Any], str, int]:
        env = served(env_name)
        body = await read_json(request)
        if not isinstance(body, dict):
            raise HTTPException(422, "the body must be a JSON object with 'split'")
        split = body.get("split")
        if split not in env.splits:
            raise HTTPException(400, "Invalid split")
        return env, body, str(split), _seed(body)

    @app.get("/list_environments")
    async def list_environments() -> list[str]:
        return list(table.envs)

    @app.post("/ping")
    async def ping(request: Request) -> dict[str, str]:
        session_of(request)
        return {"status": "ok"}

    @app.post("/create_session")
    async def create_session() -> StreamingResponse:
        sid = str(uuid.uuid4())

        async def stream() -> AsyncIterator[bytes]:
            yield _sse("task_id", sid)
            yield _sse("end", "")

        return StreamingResponse(stream(), media_type="text/event-stream", headers=_SSE_HEADERS)

    @app.post("/create")
    async def create(request: Request) -> dict[str, str]:
        sid = _sid(request)
        body = await read_json(request)
        if not isinstance(body, dict):
            raise HTTPException(422, "the body must be a CreateSession object")
        spec, split, index = body.get("task_spec"), body.get("split"), body.get("index")
        if (spec is not None) == (split is not None and index is not None) or (split is None) != (
            index is None
        ):
            raise HTTPException(422, "Provide either task_spec or both split and index, not both/neither")
        if sid in table.live:
            raise HTTPException(400, "Session already exists")
        env = served(
            body.get("env_name") or (spec.get("env") if isinstance(spec, dict) else None) or table.default
        )
        fields: dict[str, Any] = {"env": env.name, "split": split, "index": index}
        if spec is not None:
            if not isinstance(spec, dict):
                raise HTTPException(422, "task_spec must be an object (a task from /{env}/tasks)")
            fields = {"env": env.name, "split": spec.get("split", "test"), "seed": spec.get("seed", 0)}
            fields["index" if "index" in spec else "task_id"] = spec.get("index", spec.get("id"))
        try:
            session = await table.open(fields, session_id=sid)
        except (Full, FieldError) as exc:
            http_error(exc)
        if isinstance(spec, dict) and spec.get("id") not in (None, session.task.id):
            table.close(sid)
            raise HTTPException(
                400, f"task_spec.id {spec.get('id')!r} is not the task at that split, seed and index"
            )
        return {"sid": sid}

    @app.post("/delete")
    async def delete(request: Request) -> dict[str, str]:
        sid = _sid(request)
        table.close(sid)
        return {"sid": sid}

    @app.post("/delete_session")
    async def delete_session(request: Request) -> dict[str, str]:
        sid = _sid(request)
        table.close(sid)
        return {"sid": sid}

    @app.get("/{env_name}/tools")
    async def tools(env_name: str) -> dict[str, Any]:
        return _tools(served(env_name))

    @app.get("/{env_name}/splits")
    async def splits(env_name: str) -> list[dict[str, str]]:
        return [{"name": s, "type": s} for s in served(env_name).splits]

    @app.post("/{env_name}/tasks")
    async def tasks(env_name: str, request: Request) -> dict[str, Any]:
        env, _, split, seed = await split_body(request, env_name)
        if env.count(split, seed) > MAX_LISTED:
            raise HTTPException(
                400,
                f"list_tasks lists at most {MAX_LISTED} tasks; this split has {env.count(split, seed)}. "
                "Use the index-based API (num_tasks + task or task_range) instead.",
            )
        found = env.tasks(split, seed, None)
        return {"tasks": [_spec(env, split, seed, i, t) for i, t in enumerate(found)], "env_name": env.name}

    @app.post("/{env_name}/num_tasks")
    async def num_tasks(env_name: str, request: Request) -> dict[str, int]:
        env, _, split, seed = await split_body(request, env_name)
        return {"num_tasks": env.count(split, seed)}

    @app.post("/{env_name}/task")
    async def task(env_name: str, request: Request) -> dict[str, Any]:
        env, body, split, seed = await split_body(request, env_name)
        index = body.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise HTTPException(400, "Invalid index")
        try:
            found = env.task(split, seed, index)
        except FieldError:
            raise HTTPException(400, "Invalid index") from None
        return {"task": _spec(env, split, seed, index, found)}

    @app.post("/{env_name}/task_range")
    async def task_range(env_name: str, request: Request) -> dict[str, Any]:
        env, body, split, seed = await split_body(request, env_name)
        start, stop = body.get("start"), body.get("stop")
        for name, value in (("start", start), ("stop", stop)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise HTTPException(400, f"{name} must be an integer")
        first, last, _ = slice(start, stop).indices(env.count(split, seed))
        if last - first > MAX_LISTED:
            raise HTTPException(
                400, f"task_range returns at most {MAX_LISTED} tasks; ask for a smaller range"
            )
        found = env.tasks(split, seed, last)
        return {"tasks": [_spec(env, split, seed, i, found[i]) for i in range(first, min(last, len(found)))]}

    @app.get("/{env_name}/prompt")
    async def prompt(env_name: str, request: Request) -> list[dict[str, Any]]:
        session = session_of(request)
        messages = session.served.env.with_system_prompt(session.task.prompt)
        return [{"type": "text", "text": m.content, "detail": {"role": m.role}} for m in messages]

    @app.get("/{env_name}/task_tools")
    async def task_tools(env_name: str, request: Request) -> dict[str, Any]:
        return _tools(session_of(request).served)

    @app.post("/{env_name}/call")
    async def call(env_name: str, request: Request) -> StreamingResponse:
        session = session_of(request)
        body = await read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise HTTPException(422, "the body must be {'name': str, 'input': object, 'task_id'?: str}")
        task_id = body.get("task_id")
        if task_id is None:
            tool_input = body.get("input", {})
            if not isinstance(tool_input, dict):
                raise HTTPException(422, "input must be a JSON object")
            task_id = calls.start(_run_call(session, body["name"], tool_input))
        elif not isinstance(task_id, str):
            raise HTTPException(422, "task_id must be a string")
        return StreamingResponse(
            calls.stream(task_id, request), media_type="text/event-stream", headers=_SSE_HEADERS
        )


def _spec(env: ServedEnv, split: str, seed: int, index: int, task: Task) -> dict[str, Any]:
    return public_task(TaskRef(env.name, split, seed, index), task)
