"""The parts of ``verigym serve`` another server is built from (the recording gateway,
``verigym.gateway``): the request handler to subclass, the dialect routes, the guard middleware, the
wire models and the error bodies of both API shapes.

A public module so that packages outside ``serve`` can import these without reaching into its private
modules; nothing here is new, each name is the one its own module defines.
"""

from verigym.serve._app import add_error_handlers
from verigym.serve._dialects import add_dialect_routes
from verigym.serve._generation import disconnect
from verigym.serve._guard import Guard, ServeLimits
from verigym.serve._handler import Handler
from verigym.serve._messages import anthropic_error
from verigym.serve._rows import Gone
from verigym.serve._wire import ApiError, ChatRequest, CompletionRequest, error_body

__all__ = [
    "ApiError",
    "ChatRequest",
    "CompletionRequest",
    "Gone",
    "Guard",
    "Handler",
    "ServeLimits",
    "add_dialect_routes",
    "add_error_handlers",
    "anthropic_error",
    "disconnect",
    "error_body",
]
