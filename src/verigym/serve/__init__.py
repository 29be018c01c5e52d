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
  directory is named, and confined to it;
- ``workflow``: ``verigym serve`` as a library call: ``ServeConfig`` (the model, where to listen, the
  limits) checked (``check``), opened (``open_served_policy``) and served in the foreground
  (``serve_model``) or on a thread (``start_model_server``), progress as ``ServeEvent``s, problems as
  one-line ``ServeSetupError``s.

Names are imported when first asked for, so a ``ServeConfig`` is built and checked without torch.
"""

from typing import TYPE_CHECKING

from verigym._lazy import lazy_getattr

if TYPE_CHECKING:
    from verigym._http_server import ServerLimits
    from verigym.serve._app import RunningServer, create_app, serve, spawn_server
    from verigym.serve._guard import ServeLimits
    from verigym.serve.workflow import (
        ServeConfig,
        ServeEvent,
        ServeSetupError,
        check,
        open_served_policy,
        serve_model,
        start_model_server,
    )

__getattr__ = lazy_getattr(
    __name__,
    {
        "ServerLimits": "verigym._http_server",
        "RunningServer": "._app",
        "create_app": "._app",
        "serve": "._app",
        "spawn_server": "._app",
        "ServeLimits": "._guard",
        **dict.fromkeys(
            (
                "ServeConfig",
                "ServeEvent",
                "ServeSetupError",
                "check",
                "open_served_policy",
                "serve_model",
                "start_model_server",
            ),
            ".workflow",
        ),
    },
)

__all__ = [
    "RunningServer",
    "ServeConfig",
    "ServeEvent",
    "ServeLimits",
    "ServeSetupError",
    "ServerLimits",
    "check",
    "create_app",
    "open_served_policy",
    "serve",
    "serve_model",
    "spawn_server",
    "start_model_server",
]
