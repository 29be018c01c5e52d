"""``verigym.evaluate``: one eval run from a script or a notebook, the same run ``verigym eval`` makes.

::

    import verigym

    run = verigym.evaluate("arithmetic", verigym.ModelSpec(model="tiny"), num_tasks=20, out="runs/a")
    run.summary["reward_mean"], run.report_file

The steps, in order:

1. the options: an ``EvalConfig``, its fields as keywords, or both (keywords win); a model given as a
   string is the config's ``model`` (a local path, a catalogue or Hub name, or the served name when
   ``base_url`` is set);
2. the environment: a name from the registry with ``env_args`` (``verigym.load_env``), or an instance;
   an in-process checkpoint that verigym trained gets the arguments it was trained with for that
   environment (its training record, ``verigym.eval.trained``), any other pretrained in-process model
   the environment's ``real_model_args``, each unless the user set it (recorded in the config's
   ``env_args`` and ``env_args_from``, and in ``summary.json``);
3. the config's cheating penalties and MCP tools are added (``verigym.envs.prepare.prepare_env``);
4. the tasks (``num_tasks``, ``seed``, ``split``); none is an error;
5. the policy: a ``Policy`` used as given; a ``ModelSpec`` through ``make_policy``; else the config's
   ``policy="oracle"``/``"null"`` (the environment's own) or its model fields (``model``, ``base_url``,
   ...) through ``make_policy``; a served endpoint opened here is checked first (reachable, key
   accepted, and its first model when none is named);
6. ``verigym.eval.run.evaluate`` writes ``results.jsonl``, ``config.json``, ``summary.json`` and
   ``report.html`` into ``out`` (``resume=True`` continues a run there).

What the library opened (the environment by name, the policy from a spec, MCP servers) it closes. It
prints nothing: ``on_event`` receives an ``EvalEvent`` at each step and for each finished record. A
setup problem is an ``EvalSetupError``, one line (worded as ``verigym eval`` words it), its cause
chained. ``evaluate`` runs its own event loop, in a worker thread when the caller's thread already
has one (Jupyter); ``aevaluate`` is the coroutine.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from verigym._threads import blocking
from verigym.envs.base import Environment
from verigym.eval.config import ConfigError, EvalConfig, build
from verigym.eval.run import EvalResult
from verigym.eval.run import evaluate as run_eval
from verigym.policies.base import Policy, PolicyError
from verigym.policies.spec import MissingApiKey, ModelSpec, ModelSpecError, OpenedModel, open_model
from verigym.types import Record, Task

__all__ = [
    "EvalEvent",
    "EvalSetupError",
    "aevaluate",
    "default_out",
    "env_policy",
    "evaluate",
    "open_environment",
    "open_policy",
]

EventKind = Literal["env_args", "policy", "ready", "endpoint", "running", "start", "record"]


class EvalSetupError(ConfigError):
    """The run could not be set up (environment, tasks, model, endpoint): one line, its cause chained."""


@dataclass(frozen=True)
class EvalEvent:
    """One step of ``evaluate``, for progress displays.

    - ``env_args``: ``message`` says which arguments the checkpoint's training record or, for a
      pretrained model, ``real_model_args`` added;
    - ``policy``: ``message`` describes an in-process or environment policy (a served one: ``endpoint``);
    - ``ready``: environment, tasks and policy are set up; a served endpoint is checked next;
    - ``endpoint``: the served endpoint answered; ``message`` is ``MODEL at URLS``;
    - ``running``: the results store is being opened (the run begins);
    - ``start``: ``total`` samples in the run, ``done`` of them kept from before (a resumed run);
    - ``record``: ``record`` finished (scored or errored).
    """

    kind: EventKind
    message: str = ""
    total: int = 0
    done: int = 0
    record: Record | None = None


OnEvent = Callable[[EvalEvent], None]


def default_out(env: str) -> str:
    """Where a run goes when no ``out`` is given: ``runs/<env>-<YYYYmmdd-HHMMSS>``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", env)[:40]
    return f"runs/{slug}-{time.strftime('%Y%m%d-%H%M%S')}"


def open_environment(name: str, env_args: Mapping[str, Any]) -> Environment:
    """The environment ``name`` (registry, entry point, ``module:attr`` or ``file.py:attr``)."""
    from verigym.envs.registry import EnvError, load_env

    try:
        return load_env(name, **env_args)
    except EnvError as exc:
        raise EvalSetupError(str(exc)) from exc
    except Exception as exc:  # the environment's own constructor failed
        raise EvalSetupError(f"environment {name!r} failed to start: {type(exc).__name__}: {exc}") from exc


def open_policy(spec: ModelSpec) -> OpenedModel:
    """``open_model`` with its failures as ``EvalSetupError`` lines naming ``verigym eval``'s flags."""
    if not spec.served:
        try:
            import verigym.policies.default  # noqa: F401  (torch and transformers)
        except ImportError as exc:
            raise EvalSetupError(
                f"no --base-url given and the embedded default policy is unavailable ({exc}); pass --base-url"
            ) from exc
    try:
        return open_model(spec)
    except MissingApiKey as exc:
        raise EvalSetupError(exc.worded("--api-key-env")) from exc
    except ModelSpecError as exc:
        if exc.field != "model":  # --dtype, --device, --tool-format
            raise EvalSetupError(exc.worded("--")) from exc
        if str(exc).endswith("no such directory"):
            raise EvalSetupError(f"--model {exc}") from exc
        raise EvalSetupError(f"--model {spec.model}: cannot load the local model ({exc})") from exc
    except (OSError, ValueError) as exc:
        if str(exc).endswith("no such directory"):
            raise EvalSetupError(f"--model {exc}") from exc
        raise EvalSetupError(f"--model {spec.model}: cannot load the local model ({exc})") from exc


def env_policy(env: Environment, kind: str, env_name: str) -> Policy:
    """The environment's own ``oracle`` or ``null`` policy (a self-check through the whole eval)."""
    try:
        chosen = env.oracle_policy() if kind == "oracle" else env.null_policy()
    except Exception as exc:  # e.g. an oracle that needs data the environment does not have
        raise EvalSetupError(
            f"environment {env_name!r}: its {kind} policy failed: {type(exc).__name__}: {exc}"
        ) from exc
    if chosen is None:
        raise EvalSetupError(f"environment {env_name!r} has no {kind} policy (see `verigym check-env`)")
    return chosen


def _options(
    env: str | Environment,
    model: ModelSpec | Policy | str | None,
    config: EvalConfig | None,
    env_args: Mapping[str, Any] | None,
    out: str | Path | None,
    options: dict[str, Any],
) -> EvalConfig:
    """The run's ``EvalConfig``: ``config`` (or the defaults) updated by the other arguments."""
    update = dict(options)
    if isinstance(env, str):
        update["env"] = env
    elif config is None and "env" not in update:
        update["env"] = getattr(env, "name", "") or type(env).__name__
    if env_args:
        base = config.env_args if config is not None else {}
        update["env_args"] = {**base, **update.get("env_args", {}), **env_args}
    if isinstance(model, str):
        update["model"] = model
    elif isinstance(model, ModelSpec):
        named = ("model", "base_url", "api_key_env", "timeout", "max_retries", "device", "tool_format")
        update.update({f: getattr(model, f) for f in named})
        if model.dtype != "auto":
            update["dtype"] = model.dtype
    if out is not None:
        update["out"] = str(out)
    if config is not None:
        current = config.model_dump()
        update = {k: v for k, v in update.items() if k not in current or current[k] != v}
    if config is None or update:
        config = build({**(config.model_dump() if config is not None else {}), **update}, "evaluate")
    else:
        config = config.model_copy(deep=True)  # ours to complete (the served model's name)
    if config.out is None:
        config.out = default_out(config.env)
    return config


async def _check(policy: Any, config: EvalConfig) -> None:
    try:
        models = await policy.check()
    except PolicyError as exc:
        raise EvalSetupError(f"--base-url: {exc}") from exc
    if not config.model:
        if not models:
            raise EvalSetupError("--model is required: the server at --base-url lists no models")
        policy.model = config.model = models[0]


async def _close(*owners: object) -> None:
    for owner in owners:  # an environment may hold clients of its own (a judge)
        close = getattr(owner, "aclose", None)
        if close is not None:
            await close()


async def aevaluate(
    env: str | Environment,
    model: ModelSpec | Policy | str | None = None,
    config: EvalConfig | None = None,
    *,
    env_args: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    on_event: OnEvent | None = None,
    **options: Any,
) -> EvalResult:
    """Run (or resume) one eval and return its ``EvalResult`` (summary, ``out`` and file paths).

    ``options`` are ``EvalConfig`` fields (``num_tasks``, ``samples_per_task``, ``seed``, ...). See the
    module doc for the steps; raises ``EvalSetupError`` (and ``ConfigError``/``StoreError`` for an
    ``out`` that holds another run's results).
    """
    from verigym.envs.prepare import close_servers, prepare_env
    from verigym.envs.registry import EnvError

    config = _options(env, model, config, env_args, out, options)
    folder = Path(config.out or default_out(config.env))  # _options always sets out

    def emit(event: EvalEvent) -> None:
        if on_event is not None:
            on_event(event)

    given = model if isinstance(model, Policy) else None
    spec = model if isinstance(model, ModelSpec) else config.model_spec()
    own_policy = config.policy if not isinstance(model, (Policy, ModelSpec)) else None  # a model given wins
    owned: Environment | None = None
    if isinstance(env, str):
        env_args = dict(config.env_args)
        environment = owned = open_environment(config.env, env_args)
    else:
        environment = env
    opened: OpenedModel | None = None
    if owned is not None and own_policy is None and given is None and not spec.served:
        config, environment, opened = _model_args(config, environment, spec, emit)
        owned = environment
    try:
        servers = prepare_env(environment, config.rubric.penalties, config.tools.mcp)
    except EnvError as exc:
        raise EvalSetupError(str(exc)) from exc
    if config.agent is not None or config.agent_cmd is not None:  # the user's own program as the harness
        environment = owned = with_agent(environment, config)
    try:
        return await _run(environment, owned, given, own_policy, opened, spec, config, folder, resume, emit)
    finally:
        close_servers(servers)
        if config.agent is not None or config.agent_cmd is not None:
            from verigym.agents import AgentProgramEnv

            if isinstance(environment, AgentProgramEnv):
                environment.close()  # its gateway


def with_agent(environment: Environment, config: EvalConfig) -> Environment:
    """``environment`` harnessed by ``config.agent`` / ``agent_cmd`` (``verigym.agents``)."""
    from verigym.agents import agent_env

    try:
        return agent_env(
            environment,
            config.agent,
            config.agent_cmd,
            timeout_s=config.agent_timeout_s,
            on_error=config.on_error,
        )
    except ValueError as exc:
        raise EvalSetupError(str(exc)) from exc


def _model_args(
    config: EvalConfig, environment: Environment, spec: ModelSpec, emit: Callable[[EvalEvent], None]
) -> tuple[EvalConfig, Environment, OpenedModel | None]:
    """The environment rebuilt with the arguments the in-process model wants, unless the user set them:
    those its checkpoint was trained with (``eval.trained``), else, for a pretrained model, the
    environment's ``real_model_args``; recorded in ``config`` (``env_args``, ``env_args_from``)."""
    from verigym.eval.trained import CHECKPOINT, REAL_MODEL, USER, sources_of, trained_args
    from verigym.policies.default import find_record
    from verigym.policies.trained import RecordError

    try:
        record = find_record(spec.model)
    except RecordError as exc:
        raise EvalSetupError(f"--model {spec.model}: {exc}") from exc
    chosen = trained_args(config.env, config.env_args, record, config.env_args_from)
    opened: OpenedModel | None = None
    if chosen is not None:
        env_args, sources = chosen.args, chosen.sources
        emit(EvalEvent("env_args", chosen.message))
    else:
        known = sources_of(config.env_args, config.env_args_from)
        mine = {k: v for k, v in config.env_args.items() if known[k] == USER}
        extra = {k: v for k, v in environment.real_model_args.items() if k not in mine}
        env_args, sources = dict(config.env_args), known
        if extra:
            opened = open_policy(spec)  # whether they apply is known once the model is loaded
            # only where the model is known to be pretrained: a server may host the tiny model
            if not getattr(opened.policy, "is_toy", True):
                env_args = {**mine, **extra}
                sources = {**{k: USER for k in mine}, **{k: REAL_MODEL for k in extra}}
                shown = " ".join(f"{k}={v}" for k, v in extra.items())
                emit(EvalEvent("env_args", f"{config.env}: {shown} for a pretrained model"))
    if env_args != config.env_args:
        environment = open_environment(config.env, env_args)
    # recorded in config.json: --resume asks the same, and summary.json says where each came from
    sources = {k: v for k, v in sources.items() if v in (CHECKPOINT, REAL_MODEL)}
    config = config.model_copy(update={"env_args": env_args, "env_args_from": sources})
    return config, environment, opened


async def _run(
    environment: Environment,
    owned: Environment | None,
    given: Policy | None,
    own_policy: str | None,
    opened: OpenedModel | None,
    spec: ModelSpec,
    config: EvalConfig,
    out: Path,
    resume: bool,
    emit: Callable[[EvalEvent], None],
) -> EvalResult:
    try:
        tasks: list[Task] = environment.tasks(config.num_tasks, seed=config.seed, split=config.split)
    except Exception as exc:  # a malformed dataset: the loader's message names file and row
        raise EvalSetupError(f"environment {config.env!r}: cannot load tasks: {exc}") from exc
    if not tasks:
        raise EvalSetupError(f"environment {config.env!r} has no tasks in split {config.split!r}")
    made: Policy | None = None
    if given is not None:
        policy, description, remote = given, "", False
    elif own_policy is not None:
        if config.base_url or config.model:
            flag = "--base-url" if config.base_url else "--model"
            raise EvalSetupError(f"--policy {own_policy} runs the environment's own policy: drop {flag}")
        policy = made = env_policy(environment, own_policy, config.env)
        description, remote = f"{policy.name} (the environment's {own_policy} policy, no model)", False
    else:
        opened = opened or open_policy(spec)
        policy = made = opened.policy
        description, remote = opened.description, opened.remote
    if not remote and description:
        emit(EvalEvent("policy", description))
    emit(EvalEvent("ready"))
    try:
        if remote:
            await _check(policy, config)
            emit(EvalEvent("endpoint", f"{config.model or ''} at {', '.join(config.base_url)}"))
        emit(EvalEvent("running"))
        result = await run_eval(
            environment,
            policy,
            tasks,
            config,
            out=out,
            resume=resume,
            policy_description=description,
            on_start=lambda total, done: emit(EvalEvent("start", total=total, done=done)),
            on_record=lambda record: emit(EvalEvent("record", record=record)),
        )
    finally:
        await _close(made, owned)
    result.config = config
    return result


evaluate = blocking(
    aevaluate,
    "evaluate",
    """``aevaluate`` on an event loop of its own (in a worker thread when this thread runs one).""",
)
