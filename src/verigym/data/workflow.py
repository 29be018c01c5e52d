"""``verigym.data.profile`` and ``verigym.data.synthesize``: evals with a purpose, as library calls.

::

    from verigym import ModelSpec, data

    prof = data.profile("arithmetic", ModelSpec(model="tiny"), num_tasks=100, samples_per_task=8,
                        band=(0.2, 0.8), out="runs/prof")
    prof.in_band, prof.profile.pass_rate(prof.in_band[0])

    syn = data.synthesize("arithmetic", policy="oracle", num_tasks=200, keep="shortest", out="runs/syn")
    syn.kept, syn.stats.yield_rate, syn.sft_file

Each runs one eval (``verigym.evaluate``, with its arguments: an environment, a model, an
``EvalConfig`` and its fields as keywords, ``out``, ``resume``, ``on_event``) into ``out``, so a crash
or an interrupt loses nothing and ``resume=True`` continues, then derives from the run's typed
records (those it produced, handed over as they finish; a resumed run's kept ones from its results
store):

- ``profile``: each task's pass rate (``Profile``: the share of its scored samples with a reward of at
  least ``threshold``) written to ``profile.jsonl``, and the task ids whose pass rate is inside the open
  ``band`` to ``band.json``;
- ``synthesize``: rejection sampling (``select_verified``): the verified samples, all of them, the
  shortest or a diverse subset per task, written as SFT lines to ``sft.jsonl`` and the yield to
  ``synth.json``.

When every sample errored nothing is derived (errors are never scored as zeros): the result's
``profile`` / ``stats`` are None and no file beyond the eval's is written. Progress comes as the eval's
``EvalEvent``s; set-up problems are ``EvalSetupError`` lines, a bad ``keep`` or ``band`` a
``ValueError`` naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from verigym._files import write_json
from verigym._threads import blocking
from verigym.data.difficulty import Profile
from verigym.data.rejection import Keep, RejectionStats, select_verified, write_sft
from verigym.envs.base import Environment
from verigym.eval.config import EvalConfig
from verigym.eval.run import EvalResult
from verigym.eval.workflow import EvalEvent, aevaluate
from verigym.policies.base import Policy
from verigym.policies.spec import ModelSpec
from verigym.types import Record

__all__ = [
    "ProfileResult",
    "SynthResult",
    "aprofile",
    "asynthesize",
    "profile",
    "synthesize",
]

OnEvent = Callable[[EvalEvent], None]
Model = ModelSpec | Policy | str | None


@dataclass
class ProfileResult:
    """A finished profile: the eval under it, the per-task pass rates and the tasks in ``band``."""

    run: EvalResult
    profile: Profile | None  # None when every sample errored (nothing profiled, no file written)
    band: tuple[float, float]
    in_band: list[str] = field(default_factory=list)

    @property
    def out(self) -> Path:
        return self.run.out

    @property
    def profile_file(self) -> Path:
        return self.run.out / "profile.jsonl"

    @property
    def band_file(self) -> Path:
        return self.run.out / "band.json"


@dataclass
class SynthResult:
    """A finished rejection-sampling run: the eval under it, the kept records and the yield."""

    run: EvalResult
    kept: list[Mapping[str, Any]] = field(default_factory=list)  # the kept records, JSON form
    stats: RejectionStats | None = None  # None when every sample errored (no file written)

    @property
    def out(self) -> Path:
        return self.run.out

    @property
    def sft_file(self) -> Path:
        return self.run.out / "sft.jsonl"

    @property
    def stats_file(self) -> Path:
        return self.run.out / "synth.json"


def _every_sample_errored(run: EvalResult) -> bool:
    return bool(run.summary["n_samples"]) and not run.summary["n_scored"]


async def _eval_records(
    env: str | Environment,
    model: Model,
    config: EvalConfig | None,
    env_args: Mapping[str, Any] | None,
    out: str | Path | None,
    resume: bool,
    on_event: OnEvent | None,
    options: dict[str, Any],
) -> tuple[EvalResult, list[Record]]:
    """The eval and its records in results-file order: the ones it produced, as they finished, after a
    resumed run's kept ones (read typed from its results store)."""
    produced: list[Record] = []

    def seen(event: EvalEvent) -> None:
        if event.kind == "record" and event.record is not None:
            produced.append(event.record)
        if on_event is not None:
            on_event(event)

    run = await aevaluate(
        env, model, config, env_args=env_args, out=out, resume=resume, on_event=seen, **options
    )
    if run.skipped:
        from verigym.eval.store import load_records

        return run, load_records(run.results_file)  # the kept records, then this invocation's
    return run, produced


def _checked_band(band: Sequence[float]) -> tuple[float, float]:
    if len(band) != 2:
        raise ValueError(f"band {tuple(band)!r}: expected two pass rates (low, high)")
    return float(band[0]), float(band[1])


async def aprofile(
    env: str | Environment,
    model: Model = None,
    config: EvalConfig | None = None,
    *,
    band: Sequence[float] = (0.0, 1.0),
    threshold: float = 1.0,
    env_args: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    on_event: OnEvent | None = None,
    **options: Any,
) -> ProfileResult:
    """Estimate each task's pass rate from the run's samples; write ``profile.jsonl`` and ``band.json``.

    The arguments before ``band`` and ``options`` are ``verigym.evaluate``'s (``num_tasks``,
    ``samples_per_task``: the estimate's n, ``split``, ``temperature``, ...); ``band`` is the open pass-rate
    interval whose task ids ``band.json`` lists, ``threshold`` the reward that counts as a pass.
    """
    low, high = _checked_band(band)
    run, records = await _eval_records(env, model, config, env_args, out, resume, on_event, options)
    if _every_sample_errored(run):
        return ProfileResult(run, None, (low, high))
    prof = Profile.from_records(records, threshold=threshold)
    prof.save(run.out / "profile.jsonl")
    chosen = prof.in_band(low, high)
    # the band as given (a list of what the caller passed), as ``verigym profile`` always wrote it
    write_json(run.out / "band.json", {"band": list(band), "task_ids": chosen}, indent=1)
    return ProfileResult(run, prof, (low, high), chosen)


async def asynthesize(
    env: str | Environment,
    model: Model = None,
    config: EvalConfig | None = None,
    *,
    keep: Keep = "all",
    per_task: int | None = None,
    threshold: float = 1.0,
    env_args: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    on_event: OnEvent | None = None,
    **options: Any,
) -> SynthResult:
    """Rejection sampling: keep the verified samples (reward at least ``threshold``) as SFT lines.

    The arguments before ``keep`` and ``options`` are ``verigym.evaluate``'s (the teacher is ``model``, or
    ``policy="oracle"`` for the environment's own oracle); ``keep`` is ``all``, ``shortest`` (the fewest
    completion tokens first, one per task unless ``per_task``) or ``diverse`` (n-gram dedupe), and
    ``per_task`` caps how many are kept per task. Writes ``sft.jsonl`` and ``synth.json``.
    """
    if keep not in get_args(Keep):
        raise ValueError(f"keep {keep!r}: expected all, shortest or diverse")
    run, records = await _eval_records(env, model, config, env_args, out, resume, on_event, options)
    if _every_sample_errored(run):
        return SynthResult(run)
    kept, stats = select_verified(records, threshold=threshold, keep=keep, per_task=per_task)
    write_sft(kept, run.out / "sft.jsonl")
    write_json(run.out / "synth.json", stats.to_dict(), indent=1)
    return SynthResult(run, list(kept), stats)


profile = blocking(
    aprofile,
    "profile",
    """``aprofile`` on an event loop of its own (in a worker thread when this thread runs one).""",
)
synthesize = blocking(
    asynthesize,
    "synthesize",
    """``asynthesize`` on an event loop of its own (in a worker thread when this thread runs one).""",
)
