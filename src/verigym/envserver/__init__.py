"""``verigym env-server``: verigym environments served over HTTP in OpenEnv's and the Open Reward Standard's
protocols (``docs/envserver.md`` has the wire mapping).

- ``_app``: the FastAPI app (``create_app``), ``EnvServer`` (on a background thread) and ``serve_envs``
  (the foreground, for the CLI);
- ``_openenv``: OpenEnv's routes (``WS /ws``, ``/reset``, ``/step``, ``/state``, ``/schema``, ``/metadata``,
  ``/health``) and ``/sessions/{id}`` (state, close, fork); ``_jsonrpc``: openenv's ``/mcp`` JSON-RPC;
- ``_ors``: the ORS routes (task listing, ``X-Session-ID`` sessions, prompt, tools, SSE tool calls);
- ``_sessions``: the session table (cap, idle reaper, fork by checked replay); ``_episode``: one episode
  driven step by step through the environment's own ``rollout``; ``_catalog``: the served environments'
  tasks and their public view; ``_wire``: steps in, observations out; ``_guard``: API key and body cap;
  ``_errors``: one-line HTTP errors.
"""

from verigym.envserver._app import EnvServer, create_app, serve_envs

__all__ = ["EnvServer", "create_app", "serve_envs"]
