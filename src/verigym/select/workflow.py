"""``verigym.select.run_selection``: the experiment ``verigym select`` runs, from a script or a notebook.

::

    from verigym import ModelSpec
    from verigym.select import SelectConfig, run_selection

    cfg = SelectConfig(methods=["majority", "deepconf-online"], ns=[1, 4, 16])
    run = run_selection("math", ModelSpec(model="tiny"), cfg, num_tasks=20, out="runs/sel")
    run.summary["methods"]["majority"][-1]["accuracy"]

The steps, in order:

1. the environment: a name from the registry with ``env_args`` (an in-process checkpoint that verigym
   trained gets the arguments it was trained with on that environment, ``verigym.eval.trained``), or
   an instance;
2. its tasks (``num_tasks``, the config's ``seed``); none is an error;
3. the model: a ``Policy`` used as given, else a ``ModelSpec`` (or a model name) through the one
   opener, ``policies.spec.open_model``; the best-of-n ``grader`` (a ``Grader``, a
   ``(task, trajectory)`` function or its ``module:attr``); the ``judge`` of genselect and best-of-n
   when a method needs one (default: the sampled model);
4. ``out`` (default ``runs/select-<env>-<time>``) must not hold results yet; a served endpoint is
   checked (reachable, key accepted, its first model when none is named);
5. ``run_experiment`` samples ``max(ns)`` traces per task, measures every method at every N and
   writes ``results.jsonl``, ``summary.json`` and ``report.html``.

What it opened (the environment by name, policies from specs) it closes. It prints nothing:
``on_event`` receives a ``SelectEvent`` at each step. A setup problem is a ``SelectSetupError``, one
line worded as ``verigym select`` words it; an experiment that cannot select (every sample errored,
DeepConf without logprobs) a ``ValueError``. ``run_selection`` runs its own event loop (in a worker
thread when the caller's thread already has one); ``arun_selection`` is the coroutine.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from verigym._threads import blocking
from verigym.envs.base import Environment
from verigym.policies.base import ModelSpecError, Policy, PolicyError
from verigym.policies.spec import MissingApiKey, ModelSpec, open_model
from verigym.rubric import Grader
from verigym.select.experiment import ExperimentResult, run_experiment
from verigym.select.methods import SelectConfig, needs_judge
from verigym.types import Record, Sampling, Task

__all__ = [
    "SelectEvent",
    "SelectSetupError",
    "arun_selection",
    "default_select_out",
    "online_mode",
    "run_selection",
]

EventKind = Literal["env_args", "policy", "start", "record", "select"]


class SelectSetupError(ValueError):
    """The experiment could not be set up (environment, tasks, model, judge, grader, endpoint, out)."""


@dataclass(frozen=True)
class SelectEvent:
    """One step of ``run_selection``, for progress displays.

    - ``env_args``: ``message`` says which arguments the checkpoint's training record added;
    - ``policy``: ``message`` describes an in-process model (a served one says nothing);
    - ``start``: sampling begins: ``total`` samples, ``samples`` of them per task;
    - ``record``: ``record`` finished (scored or errored);
    - ``select``: ``done`` of ``total`` selections of the method and N in ``message`` (``majority@4``).
    """

    kind: EventKind
    message: str = ""
    total: int = 0
    done: int = 0
    samples: int = 0
    record: Record | None = None


OnEvent = Callable[[SelectEvent], None]
GraderLike = Grader | Callable[..., Any] | str


def default_select_out(env: str) -> Path:
    """Where a run goes when no ``out`` is given: ``runs/select-<env>-<YYYYmmdd-HHMMSS>``."""
    return Path(f"runs/select-{re.sub(r'[^A-Za-z0-9_.-]+', '_', env)[:40]}-{time.strftime('%Y%m%d-%H%M%S')}")


def online_mode(policy: Policy, remote: bool) -> str:
    """How DeepConf-online's tokens were counted with this policy (``summary.json``'s
    ``deepconf_online_mode``)."""
    if remote:
        return (
            "replayed: this OpenAI-compatible endpoint has no early-stop hook, so it generated every trace in "
            "full; the tokens shown are what a server running OnlineDeepConf (see its server_args) would spend"
        )
    return "replayed: LocalPolicy with OnlineDeepConf as early_stop cuts the same traces at the same tokens"


def _environment(name: str, env_args: Mapping[str, Any]) -> Environment:
    from verigym.envs.registry import load_env

    try:
        env = load_env(name, **env_args)
    except Exception as exc:  # unknown name or a bad env arg: the registry's message is one line
        raise SelectSetupError(f"environment {name!r}: {exc}") from exc
    if not isinstance(env, Environment):
        raise SelectSetupError(f"environment {name!r} is a {type(env).__name__}, not a verigym Environment")
    return env


def _open(spec: ModelSpec, flag: str) -> tuple[Policy, str, bool]:
    """The policy of ``spec``, a line describing it and whether it is remote; failures worded with the
    prefix of the flags it came from (``--``, ``--judge-``)."""
    try:
        opened = open_model(spec)
    except MissingApiKey as exc:
        raise SelectSetupError(
            exc.worded("--api-key-env")
            if exc.implicit
            else f"{flag}: the environment variable {exc.variable} is not set"
        ) from exc
    except ModelSpecError as exc:
        if exc.field != "model":
            raise SelectSetupError(exc.worded("--")) from exc
        raise SelectSetupError(f"{flag}model {spec.model}: cannot load the local model ({exc})") from exc
    except (OSError, ValueError, PolicyError) as exc:
        raise SelectSetupError(f"{flag}model {spec.model}: cannot load the local model ({exc})") from exc
    return opened.policy, opened.description, opened.remote


def resolve_grader(target: GraderLike) -> Grader:
    """A best-of-n ``Grader`` from a Grader, a ``(task, trajectory)`` function or its ``module:attr``."""
    if isinstance(target, Grader):
        return target
    if not isinstance(target, str):
        return Grader(target, name=getattr(target, "__name__", "grader"))
    module, _, attr = target.rpartition(":")
    if not module or not attr:
        raise SelectSetupError(f"--bon-grader {target!r}: expected module:attr")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise SelectSetupError(
            f"--bon-grader {target!r}: cannot import it ({type(exc).__name__}: {exc})"
        ) from exc
    if isinstance(found, Grader):
        return found
    if callable(found):
        return Grader(found, name=attr)
    raise SelectSetupError(f"--bon-grader {target!r} is a {type(found).__name__}, not a Grader or a function")


async def _check(policy: Any, flag: str) -> None:
    try:
        models = await policy.check()
    except PolicyError as exc:
        raise SelectSetupError(f"{flag}base-url: {exc}") from exc
    if not policy.model:
        if not models:
            raise SelectSetupError(f"{flag}model is required: the server lists no models")
        policy.model = models[0]


def _spec(model: ModelSpec | str | None, concurrency: int) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else ModelSpec(model=model, concurrency=concurrency)


async def arun_selection(
    env: str | Environment,
    model: ModelSpec | Policy | str | None,
    config: SelectConfig | None = None,
    *,
    judge: ModelSpec | Policy | str | None = None,
    grader: GraderLike | None = None,
    env_args: Mapping[str, Any] | None = None,
    num_tasks: int = 50,
    sampling: Sampling | None = None,
    concurrency: int = 128,
    out: str | Path | None = None,
    on_event: OnEvent | None = None,
) -> ExperimentResult:
    """Run one selection experiment and return its ``ExperimentResult`` (summary, pools, records, out).

    ``config``: the methods, Ns and knobs (default ``SelectConfig()``); ``grader`` replaces its
    ``grader``. ``sampling`` defaults to temperature 1, 512 tokens, the config's seed. ``concurrency``:
    rollouts in flight (and a model name's requests). See the module doc for the steps.
    """
    cfg = config or SelectConfig()
    sampling = sampling or Sampling(temperature=1.0, max_tokens=512, seed=cfg.seed)

    def emit(event: SelectEvent) -> None:
        if on_event is not None:
            on_event(event)

    given = model if isinstance(model, Policy) else None
    spec = None if given is not None else _spec(model if not isinstance(model, Policy) else None, concurrency)
    args = dict(env_args or {})
    if isinstance(env, str):
        env_name = env
        trained = None if spec is None or spec.served else _trained(env, args, spec.model)
        if trained is not None:
            args = trained.args
            emit(SelectEvent("env_args", trained.message))
        sources = trained.sources if trained is not None else {k: "user" for k in args}
        environment = owned = _environment(env, args)
    else:
        env_name, environment, owned = getattr(env, "name", "") or type(env).__name__, env, None
        sources = {k: "user" for k in args}
    made: list[Policy] = []
    try:
        tasks = _tasks(environment, env_name, num_tasks, cfg.seed)
        if given is not None:
            policy, description, remote = given, "", False
        else:
            assert spec is not None
            policy, description, remote = _open(spec, "--")
            made.append(policy)
        if grader is not None:
            cfg = replace(cfg, grader=resolve_grader(grader))
        chosen, judge_remote = None, False
        if needs_judge(cfg.methods) and not (cfg.methods == ["best-of-n"] and cfg.grader is not None):
            if judge is None:
                chosen = policy
            elif isinstance(judge, Policy):
                chosen = judge
            else:
                chosen, _, judge_remote = _open(_spec(judge, concurrency), "--judge-")
                made.append(chosen)
        if not remote and description:
            emit(SelectEvent("policy", description))
        folder = Path(out) if out is not None else default_select_out(env_name)
        if (folder / "results.jsonl").exists() and (folder / "results.jsonl").stat().st_size:
            raise SelectSetupError(f"{folder}/results.jsonl already holds results; pick another --out")
        samples = max(cfg.ns)
        emit(SelectEvent("start", total=len(tasks) * samples, samples=samples))
        if remote:
            await _check(policy, "--")
        if chosen is not None and chosen is not policy and judge_remote:
            await _check(chosen, "--judge-")
        return await run_experiment(
            environment,
            policy,
            tasks,
            cfg,
            sampling=sampling,
            concurrency=concurrency,
            judge=chosen,
            out=folder,
            env_name=env_name,
            on_record=lambda r: emit(SelectEvent("record", record=r)),
            on_select=lambda label, done, total: emit(SelectEvent("select", label, total=total, done=done)),
            extra_meta={
                "deepconf_online_mode": online_mode(policy, remote),
                "env_args": args,
                "env_args_from": sources,
            },
        )
    finally:
        for owner in [*{id(p): p for p in made}.values(), owned]:
            close = getattr(owner, "aclose", None)
            if close is not None:
                await close()


def _trained(env: str, env_args: dict[str, Any], model: str | None) -> Any:
    """``env_args`` completed with what the in-process checkpoint ``model`` was trained with on ``env``
    (``verigym.eval.trained``); None when it has no training record for ``env``."""
    from verigym.eval.trained import trained_args
    from verigym.policies.default import find_record
    from verigym.policies.trained import RecordError

    try:
        return trained_args(env, env_args, find_record(model))
    except RecordError as exc:
        raise SelectSetupError(f"--model {model}: {exc}") from exc


def _tasks(environment: Environment, name: str, num_tasks: int, seed: int) -> list[Task]:
    try:
        tasks = environment.tasks(num_tasks, seed=seed)
    except Exception as exc:  # a malformed dataset: the loader's message names file and row
        raise SelectSetupError(f"environment {name!r}: cannot load tasks: {exc}") from exc
    if not tasks:
        raise SelectSetupError(f"environment {name!r} has no tasks")
    return tasks


run_selection = blocking(
    arun_selection,
    "run_selection",
    """``arun_selection`` on an event loop of its own (in a worker thread when this thread runs one).""",
)
