"""What ``verigym serve`` asks of a client before a route runs: the API key and a bounded body.

``Guard`` is pure ASGI middleware in front of the FastAPI app, built from ``verigym._asgi_guard``'s
pieces (as ``verigym env-server``'s guard is); it never buffers a body itself:

- with an API key, every request except ``GET /health`` must carry ``Authorization: Bearer KEY``
  (compared in constant time with ``hmac.compare_digest``); otherwise a 401 in OpenAI's error shape.
  The key is held only in memory: it is never logged, echoed in an error or written to a file.
- a body larger than ``max_body_bytes`` gets a 413: at once when ``Content-Length`` announces it (the
  body is never read), else as soon as the streamed chunks pass the cap (``run_capped``).

``ServeLimits`` holds these caps and the admission limits of ``_admission``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from verigym._asgi_guard import ApiKey, request_headers, run_capped, send_json
from verigym.serve._wire import error_body

__all__ = ["ApiKey", "Guard", "ServeLimits"]  # ApiKey: verigym._asgi_guard's, for _app

MiB = 1024 * 1024


@dataclass(frozen=True)
class ServeLimits:
    """How much one client may ask of the server (``verigym serve --max-...`` flags of these names).

    ``max_body_bytes``: the largest request body (413 past it). ``max_concurrent_requests``: requests
    being generated at once; ``max_queued_tokens``: their prompt tokens plus ``max_tokens``, times
    ``n``, summed (429 with ``Retry-After: retry_after_s`` past either; one request that alone needs
    more than ``max_queued_tokens`` can never run and gets 400).
    """

    max_body_bytes: int = 8 * MiB
    max_concurrent_requests: int = 256
    max_queued_tokens: int = 1 << 20
    retry_after_s: int = 1

    def __post_init__(self) -> None:
        for field in ("max_body_bytes", "max_concurrent_requests", "max_queued_tokens", "retry_after_s"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field} must be at least 1, got {getattr(self, field)}")


def _too_large(limit: int) -> str:
    return (
        f"the request body is larger than this server's limit of {limit} bytes "
        "(verigym serve --max-body-bytes raises it)"
    )


class Guard:
    """The API key and the body cap, in front of ``app`` (module doc)."""

    def __init__(self, app: ASGIApp, *, api_key: ApiKey | None, max_body_bytes: int) -> None:
        self.app = app
        self._key = api_key
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = request_headers(scope)
        if self._key is not None and scope["path"] != "/health":
            problem = self._auth_problem(headers.get(b"authorization"))
            if problem:
                body = error_body(problem, "invalid_request_error", code="invalid_api_key")
                await send_json(send, 401, body, [(b"www-authenticate", b"Bearer")])
                return
        await run_capped(
            self.app,
            scope,
            receive,
            send,
            headers=headers,
            limit=self.max_body_bytes,
            detail=_too_large(self.max_body_bytes),
            error=_invalid_request,
        )

    def _auth_problem(self, header: bytes | None) -> str | None:
        """Why ``header`` does not authorize the request (None: it does)."""
        assert self._key is not None
        if header is None:
            return (
                "no API key: send it as 'Authorization: Bearer KEY' (this server was started with an API key)"
            )
        scheme, _, token = header.strip().partition(b" ")
        if scheme.lower() != b"bearer" or not self._key.matches(token.strip()):
            return "incorrect API key (send it as 'Authorization: Bearer KEY')"
        return None


def _invalid_request(message: str) -> dict[str, Any]:
    """The 413's body in OpenAI's error shape."""
    return error_body(message, "invalid_request_error")
