"""``verigym serve``: an OpenAI-compatible HTTP server for a ``LocalPolicy``.

- ``_app``: the FastAPI app and its routes (``create_app``), ``serve`` (run it in the foreground),
  ``RunningServer`` (in a thread) and ``spawn_server`` (``verigym serve`` in a subprocess), both run by
  ``verigym._http_server`` with its ``ServerLimits`` (read deadlines, keep-alive, connection cap);
- ``_handler``: requests to the policy's rows and results to OpenAI responses, on ``_rows`` (a
  request's rows and running them) and ``_streaming`` (the SSE streaming of ``stream=true`` chat and
  text completions, ``Handler.stream`` and ``stream_text``);
- ``_wire``: the request models, logprob formats and OpenAI-style error bodies;
- ``_guard``: the API key and the body-size cap (pure ASGI middleware) and ``ServeLimits``;
- ``_admission``: prompts too long for the context refused before tokenizing, concurrent requests and
  queued tokens counted (429 when full);
- ``_weights``: the run-time weight endpoints (LoRA load/unload, full reload), off unless an adapter
  directory is named, and confined to it.
"""

from verigym._http_server import ServerLimits
from verigym.serve._app import RunningServer, create_app, serve, spawn_server
from verigym.serve._guard import ServeLimits

__all__ = ["RunningServer", "ServeLimits", "ServerLimits", "create_app", "serve", "spawn_server"]
