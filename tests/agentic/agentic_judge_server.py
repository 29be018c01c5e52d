"""A tiny OpenAI-compatible judge server (FastAPI) with a fixed latency, for tests and benchmarks.

``python agentic_judge_server.py --port P [--latency S] [--cheat-marker TEXT]``

Every chat completion waits ``--latency`` seconds, then answers: a cheat-review prompt (one that
asks for ``VERDICT: CHEATING or VERDICT: CLEAN``) gets ``VERDICT: CHEATING`` when the prompt holds
``--cheat-marker`` and ``VERDICT: CLEAN`` otherwise; any other prompt (a rubric criterion) gets
``{"explanation": "...", "criteria_met": true}``. ``GET /health`` and ``GET /v1/models`` answer at once.

It also plays scripted *policies*, chosen by the request's ``model``: ``hedger`` answers
``Answer: 3`` then ``Answer: 4``; ``honest`` answers ``Answer: 3``; ``tool-user`` calls the offered
tool ``add`` with ``{"a": 2, "b": 5}`` and then answers with the tool's result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

app = FastAPI()
SETTINGS: dict[str, Any] = {"latency": 0.0, "marker": "CHEAT-MARKER"}


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@app.get("/v1/models")
async def models() -> dict[str, Any]:
    return {"object": "list", "data": [{"id": "judge", "object": "model"}]}


@app.post("/v1/chat/completions")
async def chat(body: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(float(SETTINGS["latency"]))
    messages = body.get("messages", [])
    prompt = "\n".join(str(m.get("content") or "") for m in messages)
    model = body.get("model") or "judge"
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if model == "judge":
        message["content"] = _judge_text(prompt)
    elif model == "hedger":
        message["content"] = "Answer: 3\nAnswer: 4"
    elif model == "honest":
        message["content"] = "Answer: 3"
    elif model == "tool-user":
        results = [m for m in messages if m.get("role") == "tool"]
        offered = [t["function"]["name"] for t in body.get("tools") or []]
        if results:
            message["content"] = str(results[-1].get("content"))
        elif "add" in offered:
            call = {
                "id": "call-1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 5}'},
            }
            message["tool_calls"] = [call]
        else:
            message["content"] = f"no add tool (offered: {offered})"
    return _completion(body, message, prompt)


def _judge_text(prompt: str) -> str:
    if "VERDICT: CHEATING or VERDICT: CLEAN" in prompt:
        cheating = str(SETTINGS["marker"]) in prompt.split("EPISODE", 1)[-1]
        return "Reviewed.\nVERDICT: CHEATING" if cheating else "Reviewed.\nVERDICT: CLEAN"
    return json.dumps({"explanation": "the response meets it", "criteria_met": True})


def _completion(body: dict[str, Any], message: dict[str, Any], prompt: str) -> dict[str, Any]:
    return {
        "id": "judge-1",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or "judge",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": len(prompt) // 4,
            "completion_tokens": 8,
            "total_tokens": len(prompt) // 4 + 8,
        },
    }


def start_judge(latency: float = 0.0, marker: str = "CHEAT-MARKER") -> tuple[subprocess.Popen[bytes], str]:
    """Start this server in a subprocess on a free port; (process, ``.../v1`` base URL) once it answers."""
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    cmd = [sys.executable, str(Path(__file__).resolve()), "--port", str(port), "--latency", str(latency)]
    proc = subprocess.Popen(
        [*cmd, "--cheat-marker", marker], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the judge server exited with code {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc, f"http://127.0.0.1:{port}/v1"
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the judge server did not answer /health within 30s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--cheat-marker", default="CHEAT-MARKER")
    args = parser.parse_args()
    SETTINGS.update(latency=args.latency, marker=args.cheat_marker)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
