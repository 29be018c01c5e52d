"""``Tool``: a typed Python callable offered to a model, with its JSON schema.

The schema comes from the function's signature (pydantic builds it from the annotations) and
its docstring (``docstring_parser`` supplies the description and each argument's text)::

    @tool
    def add(a: int, b: int = 0) -> int:
        \"\"\"Add two integers.

        Args:
            a: the first term.
            b: the second term.
        \"\"\"
        return a + b

    add.schema()                       # OpenAI {"type": "function", "function": {...}}
    await add.call({"a": 2, "b": 3})   # "5"

Per-episode state has exactly one explicit mechanism: a parameter annotated with ``State``
(``Annotated[dict[str, Any], STATE]``) receives the episode's state dict (``ToolEnv`` passes
it); it is left out of the schema and the model cannot set it. Parameters are never
injected by name.

A ``Tool`` is immutable; ``dataclasses.replace(tool, name=...)`` makes a renamed copy.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, get_args, get_origin, get_type_hints, overload

import docstring_parser
import pydantic
import pydantic_core
from pydantic import BaseModel, ConfigDict

__all__ = ["STATE", "State", "Tool", "ToolArgumentError", "strip_titles", "tool", "tool_parts"]


class _StateMarker:
    def __repr__(self) -> str:
        return "STATE"


STATE = _StateMarker()
"""The marker that makes a parameter receive the episode state (use the ``State`` alias)."""

State = Annotated[dict[str, Any], STATE]
"""Annotate one tool parameter with this to receive the episode's state dict."""


class ToolArgumentError(ValueError):
    """The model's arguments do not match the tool's signature (the message says how)."""


def _is_state(annotation: Any) -> bool:
    return get_origin(annotation) is Annotated and any(a is STATE for a in get_args(annotation)[1:])


def strip_titles(schema: Any) -> Any:
    """Drop pydantic's auto-generated ``title`` keys (noise in a prompt); keep everything else."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key == "properties" and isinstance(value, dict):
                out[key] = {k: strip_titles(v) for k, v in value.items()}
            else:
                out[key] = strip_titles(value)
        return out
    if isinstance(schema, list):
        return [strip_titles(v) for v in schema]
    return schema


def tool_parts(schemas: Iterable[Any] | None) -> list[tuple[str, str, dict[str, Any]]]:
    """Each tool of ``schemas`` (an environment's ``tool_schemas()``: OpenAI function tools, or bare
    ``{"name", "description", "parameters"}``) as ``(name, description, JSON-schema parameters)``, the
    parameters an object schema with ``properties`` when they are an object; one without a name is left
    out."""
    out = []
    for schema in schemas or []:
        fn = schema.get("function", schema) if isinstance(schema, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
            continue
        parameters = fn.get("parameters")
        params = dict(parameters) if isinstance(parameters, Mapping) else {}
        params.setdefault("type", "object")
        if params["type"] == "object":
            params.setdefault("properties", {})
        out.append((fn["name"], str(fn.get("description") or ""), params))
    return out


def _hint_source(fn: Any) -> Any:
    """Where the annotations of a callable live: the function behind a partial or a callable object."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)) and callable(fn):
        return type(fn).__call__
    return fn


def _is_async(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isfunction(fn) or inspect.ismethod(fn):
        return inspect.iscoroutinefunction(fn)
    return inspect.iscoroutinefunction(type(fn).__call__)


def _describe_errors(name: str, exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(x) for x in err["loc"]) or "arguments"
        if err["type"] == "extra_forbidden":
            parts.append(f"{loc}: unexpected argument")
        elif err["type"] == "missing":
            parts.append(f"{loc}: missing required argument")
        else:
            parts.append(f"{loc}: {err['msg']} (got {err.get('input')!r})")
    return f"invalid arguments for {name!r}: " + "; ".join(parts)


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return pydantic_core.to_json(value, fallback=str).decode()


@dataclass(frozen=True, eq=False)  # identity equality: ``parameters`` is a dict, so no value hash
class Tool:
    """A callable the model can call, with its name, description and JSON-schema parameters.

    Build one with ``Tool.from_function`` or the ``@tool`` decorator. ``call`` validates the
    model's arguments against the signature, runs the function (sync functions in a worker
    thread, async ones awaited) and returns its result as text (strings as they are, anything
    else as JSON).
    """

    fn: Callable[..., Any]
    name: str
    description: str
    parameters: dict[str, Any]
    args_model: type[BaseModel] = field(repr=False)
    state_param: str | None = None

    @classmethod
    def from_function(
        cls, fn: Callable[..., Any], name: str | None = None, description: str | None = None
    ) -> Tool:
        """Build a tool from a type-annotated function; raises ``TypeError`` if it cannot be described."""
        if isinstance(fn, Tool):
            return fn
        tool_name = name or getattr(fn, "__name__", "")
        if not tool_name or tool_name == "<lambda>":
            raise TypeError("a tool needs a name: pass name= for lambdas and callables without __name__")
        source = _hint_source(fn)
        raw = getattr(source, "__doc__", None)
        doc_text = inspect.cleandoc(raw) if isinstance(raw, str) else None
        if not doc_text and not isinstance(fn, functools.partial):
            doc_text = inspect.getdoc(fn)
        doc = docstring_parser.parse(doc_text or "")
        arg_docs = {p.arg_name: (p.description or "") for p in doc.params}
        try:
            hints = get_type_hints(source, include_extras=True)
        except Exception as exc:
            raise TypeError(f"tool {tool_name!r}: cannot resolve type hints ({exc})") from None
        fields: dict[str, Any] = {}
        state_param = None
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {tool_name!r}: *args/**kwargs cannot be described to a model")
            if param.kind is param.POSITIONAL_ONLY:
                raise TypeError(f"tool {tool_name!r}: positional-only parameter {param.name!r}")
            if param.name not in hints:
                raise TypeError(f"tool {tool_name!r}: parameter {param.name!r} needs a type annotation")
            annotation = hints[param.name]
            if _is_state(annotation):
                if state_param is not None:
                    raise TypeError(f"tool {tool_name!r}: only one parameter may be annotated State")
                state_param = param.name
                continue
            default = ... if param.default is param.empty else param.default
            info = pydantic.Field(default, description=arg_docs.get(param.name) or None)
            fields[param.name] = (annotation, info)
        model = pydantic.create_model(  # type: ignore[call-overload]
            f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = strip_titles(model.model_json_schema())
        schema.setdefault("properties", {})
        text = description
        if text is None:
            text = "\n\n".join(p for p in (doc.short_description, doc.long_description) if p)
        return cls(
            fn=fn,
            name=tool_name,
            description=text,
            parameters=schema,
            args_model=model,
            state_param=state_param,
        )

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema (a fresh copy, safe to modify)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments converted to the signature's types; ``ToolArgumentError`` if they do not fit."""
        if not isinstance(arguments, dict):
            raise ToolArgumentError(f"arguments of {self.name!r} must be a JSON object")
        try:
            parsed = self.args_model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            raise ToolArgumentError(_describe_errors(self.name, exc)) from None
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    async def call(
        self, arguments: dict[str, Any], state: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> str:
        """Validate ``arguments``, run the tool and return its result as text.

        ``state`` is passed to the ``State``-annotated parameter, if the tool has one.
        ``timeout`` (seconds) bounds the tool's own running time: a sync tool's clock starts when
        a worker thread picks it up, so waiting for a busy thread pool is not counted against it
        (its thread cannot be killed: on timeout it finishes in the background).
        Raises ``ToolArgumentError`` for bad arguments, ``TimeoutError`` past ``timeout``; the
        tool's own exceptions propagate.
        """
        kwargs = self.validate(arguments)
        if self.state_param is not None:
            kwargs[self.state_param] = state if state is not None else {}
        if _is_async(self.fn):
            result = await asyncio.wait_for(self.fn(**kwargs), timeout)
        else:
            loop = asyncio.get_running_loop()
            started = asyncio.Event()
            context = contextvars.copy_context()

            def run() -> Any:
                loop.call_soon_threadsafe(started.set)
                return context.run(self.fn, **kwargs)

            future = loop.run_in_executor(None, run)
            await started.wait()
            result = await asyncio.wait_for(future, timeout)
            if inspect.isawaitable(result):  # a sync wrapper around a coroutine function
                result = await asyncio.wait_for(result, timeout)
        return _to_text(result)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (no validation), so decorated functions stay usable."""
        return self.fn(*args, **kwargs)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: ``@tool`` or ``@tool(name=..., description=...)`` turns a function into a ``Tool``."""
    if fn is not None:
        return Tool.from_function(fn, name=name, description=description)

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool.from_function(f, name=name, description=description)

    return wrap
