"""The recording gateway: one local OpenAI/Anthropic-compatible server for all rollouts of a run.

``Gateway(policy).start()`` serves the run's ``LocalPolicy``; ``open()`` gives each rollout a
``Session`` whose calls arrive by its URL (``/sessions/{id}/v1``), its key (the API key) or an
``X-Session-ID`` header, are sampled with the session's ``Sampling`` and recorded as ``RecordedCall``s
(exact prompt and completion token ids, logprobs, tool calls, finish reason, timing) in every dialect
``verigym serve`` speaks; ``close()`` ends it and returns them. The routing contract is
``docs/gateway.md``.

- ``_gateway``: ``Gateway`` (uvicorn on a background thread) and its app (``create_gateway_app``);
- ``_router``: the ASGI middleware that resolves a request's session and answers SDK retries from the
  record;
- ``_recording``: ``verigym serve``'s ``Handler`` with the session's sampling applied and every call
  recorded;
- ``_sessions``: ``Session``, ``RecordedCall`` and the table of open and ended sessions;
- ``_mcp``: a session's environment tools (``SessionTools``) as an MCP server at ``/sessions/{id}/mcp``.
"""

from verigym.gateway._gateway import Gateway
from verigym.gateway._mcp import SessionTools
from verigym.gateway._sessions import RecordedCall, Session

__all__ = ["Gateway", "RecordedCall", "Session", "SessionTools"]
