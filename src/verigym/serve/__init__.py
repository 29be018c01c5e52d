"""``verigym serve``: an OpenAI-compatible HTTP server for a ``LocalPolicy``.

- ``_app``: the FastAPI app and its routes (``create_app``), ``serve`` (run it with uvicorn),
  ``RunningServer`` (in a thread) and ``spawn_server`` (``verigym serve`` in a subprocess);
- ``_handler``: requests to the policy's rows and results to OpenAI responses, including the
  SSE streaming of ``stream=true`` chat completions (``Handler.stream``);
- ``_wire``: the request models, logprob formats and OpenAI-style error bodies.
"""

from verigym.serve._app import RunningServer, create_app, serve, spawn_server

__all__ = ["RunningServer", "create_app", "serve", "spawn_server"]
