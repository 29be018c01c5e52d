"""``verigym.serve.serve_model``: ``verigym serve`` as a library call, a model name in, a server out.

::

    from verigym.serve import ServeConfig, serve_model, start_model_server

    serve_model(ServeConfig(model="runs/quickstart/final", port=8000))  # blocks until Ctrl-C
    with start_model_server(ServeConfig(model="tiny", port=0)) as server:  # a background thread
        server.url  # http://127.0.0.1:PORT/v1

The steps, in order:

1. the config is checked (``check``): the port, ``max_batch_rows``, the adapter directory, torch's
   ``threads`` and, for the foreground server, that ``host:port`` can be listened on;
2. ``open_served_policy``: the model (a directory, a run directory, a LoRA adapter directory, a Hub or
   catalogue name, or ``tiny``/``small``/``base`` for a fresh one) through the one opener
   (``policies.spec.open_model``) with the config's dtype, device, tool format and batching limit; a
   checkpoint verigym trained says what it was trained on and how to evaluate it as trained; the
   ``lora`` adapters (``NAME=PATH``) are loaded;
3. the app (``create_app``: the key, the request limits, the weight endpoints confined to
   ``adapter_dir``) is served with the connection limits (``verigym._http_server``).

Building and checking a ``ServeConfig`` imports neither torch nor the app. It prints nothing:
``on_event`` receives a ``ServeEvent`` at each step. A problem is a
``ServeSetupError``, one line worded as ``verigym serve`` words it (``MODEL_PATH``, ``--lora``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from verigym._http_server import ServerLimits, listen_error
from verigym.serve._guard import ServeLimits

if TYPE_CHECKING:  # imported when a model is opened, so that a config is checked before torch loads
    from verigym.policies.local import LocalPolicy
    from verigym.serve._app import RunningServer

__all__ = [
    "ServeConfig",
    "ServeEvent",
    "ServeSetupError",
    "check",
    "open_served_policy",
    "serve_model",
    "start_model_server",
]

EventKind = Literal["record", "policy", "loading", "ready"]


class ServeSetupError(ValueError):
    """The server could not be set up (model, adapters, port, threads): one line, its cause chained."""


@dataclass(frozen=True)
class ServeConfig:
    """What ``verigym serve`` is told: the model and how to open it, where to listen, and the limits.

    ``model``: MODEL_PATH; ``name``: the model name clients use (default: the policy's); ``dtype``,
    ``device``, ``tool_format``, ``max_batch_rows``: the ``ModelSpec``'s; ``lora``: adapters to preload
    as ``NAME=PATH``; ``threads``: torch CPU threads (None: torch's choice); ``api_key``: the bearer key
    every endpoint but ``/health`` requires; ``limits``/``server_limits``: what one client may ask and
    the connection deadlines and cap; ``adapter_dir``: the one directory the weight endpoints may read
    (None: they answer 403).
    """

    model: str
    host: str = "127.0.0.1"
    port: int = 8000
    name: str | None = None
    dtype: str | None = None
    device: str | None = None
    lora: tuple[str, ...] = ()
    max_batch_rows: int = 256
    tool_format: str | None = None
    threads: int | None = None
    api_key: str | None = None
    limits: ServeLimits = field(default_factory=ServeLimits)
    server_limits: ServerLimits = field(default_factory=ServerLimits)
    adapter_dir: Path | None = None


@dataclass(frozen=True)
class ServeEvent:
    """One step of serving a model, for displays.

    - ``record``: ``message`` is a line of the checkpoint's training record (what it was trained on,
      then how to evaluate it as trained);
    - ``policy``: ``message`` describes a fresh model (``tiny``/``small``/``base``);
    - ``loading``: the model is being loaded (``message``: MODEL_PATH);
    - ``ready``: loaded; ``name`` is served at ``url`` from ``device`` with ``parameters`` weights and the
      LoRA ``adapters`` (the foreground server starts listening next).
    """

    kind: EventKind
    message: str = ""
    name: str = ""
    url: str = ""
    device: str = ""
    parameters: int = 0
    adapters: tuple[str, ...] = ()


OnEvent = Callable[[ServeEvent], None]


def check(config: ServeConfig, *, listen: bool = True) -> None:
    """``ServeSetupError`` for the first thing in ``config`` that cannot work; with ``listen``, that
    ``host:port`` can be bound (port 0 is allowed without it: the thread server picks a free one)."""
    if not (0 < config.port < 65536 or (config.port == 0 and not listen)):
        raise ServeSetupError(f"--port must be in 1..65535, got {config.port}")
    if config.max_batch_rows < 1:
        raise ServeSetupError(f"--max-batch-rows must be at least 1, got {config.max_batch_rows}")
    if config.adapter_dir is not None and not config.adapter_dir.expanduser().is_dir():
        raise ServeSetupError(f"--allow-adapter-loading {config.adapter_dir}: no such directory")
    if listen and (why := listen_error(config.host, config.port)) is not None:  # SO_REUSEADDR as uvicorn
        raise ServeSetupError(f"--host {config.host} --port {config.port}: cannot listen there ({why})")
    if config.threads is not None and config.threads < 1:
        raise ServeSetupError(f"--threads must be at least 1, got {config.threads}")


def _say_record(model_dir: Path, emit: OnEvent) -> Any:
    """The training record of a checkpoint verigym trained (``policies.trained``), said as events:
    what it was trained on, the tool format it is served in, and the eval that matches its training."""
    import json

    from verigym.policies.trained import RecordError, read_record

    try:
        record = read_record(model_dir)
    except RecordError as exc:
        raise ServeSetupError(f"MODEL_PATH {model_dir}: {exc}") from exc
    if record is None:
        return None
    emit(ServeEvent("record", f"{model_dir}: {record.describe()}"))
    for env in record.envs:
        args = "".join(
            f" --env-arg {k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in env.args.items()
        )
        if args:
            emit(
                ServeEvent(
                    "record", f"  evaluate it as trained: verigym eval {env.name} --base-url URL{args}"
                )
            )
    return record


def open_served_policy(config: ServeConfig, on_event: OnEvent | None = None) -> LocalPolicy:
    """The ``LocalPolicy`` of ``config.model`` through the one opener, with its ``lora`` adapters loaded;
    failures name MODEL_PATH or the flag."""
    from pydantic import ValidationError

    from verigym.policies.base import ModelSpecError, PolicyError
    from verigym.policies.default import resolve_model_dir
    from verigym.policies.local import LocalPolicy
    from verigym.policies.spec import ModelSpec, open_model

    def emit(event: ServeEvent) -> None:
        if on_event is not None:
            on_event(event)

    values = {"model": config.model, "dtype": config.dtype or "auto", "device": config.device}
    try:
        spec = ModelSpec.model_validate(
            {**values, "tool_format": config.tool_format, "max_batch_rows": config.max_batch_rows}
        )
    except ValidationError as exc:  # the field and what it expects
        first = exc.errors()[0]
        name = "--" + str(first["loc"][0]).replace("_", "-")
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ServeSetupError(f"{name} {first.get('input')}: {message}") from exc
    path = Path(config.model).expanduser()
    found = resolve_model_dir(path) if path.is_dir() else None
    record = _say_record(found, emit) if found is not None else None  # said before the (slow) load
    try:
        opened = open_model(spec)
    except ModelSpecError as exc:
        if exc.field != "model":
            raise ServeSetupError(exc.worded("--")) from exc
        worded = exc.worded({"model": "MODEL_PATH"}) if exc.value is not None else f"MODEL_PATH {exc}"
        raise ServeSetupError(worded) from exc
    except (PolicyError, ValueError, OSError) as exc:
        raise ServeSetupError(f"MODEL_PATH {config.model}: {exc}") from exc
    if record is None and found is None and config.model in ("tiny", "small", "base"):
        emit(ServeEvent("policy", opened.description))
    policy = opened.policy
    assert isinstance(policy, LocalPolicy)  # an in-process spec opens a LocalPolicy
    for item in config.lora:
        adapter, sep, adapter_path = item.partition("=")
        if not sep or not adapter or not adapter_path:
            raise ServeSetupError(f"--lora {item!r}: expected NAME=PATH")
        try:
            policy.load_adapter(adapter_path, adapter)
        except PolicyError as exc:
            raise ServeSetupError(f"--lora {item}: {exc}") from exc
    return policy


def _opened(config: ServeConfig, emit: OnEvent) -> LocalPolicy:
    """torch's threads set and the policy opened."""
    if config.threads is not None:
        import torch

        torch.set_num_threads(config.threads)
    emit(ServeEvent("loading", config.model))
    return open_served_policy(config, emit)


def _emitter(on_event: OnEvent | None) -> OnEvent:
    """``on_event``, or a sink when there is none."""
    return on_event if on_event is not None else (lambda event: None)


def _served_as(config: ServeConfig, policy: LocalPolicy) -> dict[str, Any]:
    """How ``config`` serves ``policy``: the keywords ``serve`` and ``RunningServer`` both take."""
    return {
        "host": config.host,
        "port": config.port,
        "name": config.name or policy.name,
        "api_key": config.api_key,
        "limits": config.limits,
        "adapter_dir": config.adapter_dir,
        "server_limits": config.server_limits,
    }


def _ready(config: ServeConfig, policy: LocalPolicy, url: str) -> ServeEvent:
    from verigym.policies.tiny import count_parameters

    return ServeEvent(
        "ready",
        name=config.name or policy.name,
        url=url,
        device=str(next(policy.model.parameters()).device),
        parameters=count_parameters(policy.model),
        adapters=tuple(policy.adapters),
    )


def serve_model(config: ServeConfig, *, on_event: OnEvent | None = None) -> None:
    """Check ``config``, open its model and serve it in the foreground until Ctrl-C or SIGTERM."""
    from verigym.serve._app import serve

    emit = _emitter(on_event)
    check(config)
    policy = _opened(config, emit)
    emit(_ready(config, policy, f"http://{config.host}:{config.port}/v1"))
    serve(policy, **_served_as(config, policy))


def start_model_server(config: ServeConfig, *, on_event: OnEvent | None = None) -> RunningServer:
    """``serve_model`` on a background thread (``port=0``: a free port); stop the returned
    ``RunningServer`` (or use it as a context manager) when done."""
    from verigym.serve._app import RunningServer

    emit = _emitter(on_event)
    check(config, listen=False)
    policy = _opened(config, emit)
    server = RunningServer(policy, **_served_as(config, policy)).start()
    emit(_ready(config, policy, server.url))
    return server
