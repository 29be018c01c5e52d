"""Cheating penalties from a config: ``[[rubric.penalties]]`` entries added to any environment's rubric.

::

    [[rubric.penalties]]
    detector = "hedged_answer"        # or copied_answer, network_attempts, protected_edits,
    amount = 1.0                      #    deleted_tests, cheat_judge
    [[rubric.penalties]]
    detector = "cheat_judge"          # an LLM reviewing each rollout ("another model to
    base_url = "http://127.0.0.1:8000/v1"  # regulate the reward model", with a large penalty)
    model = "judge"
    amount = 2.0

Each entry becomes a ``Penalty`` in the environment's ``Rubric``: when its detector fires (score
above 0.5) the reward drops by ``amount``; the detector's grade is kept as ``penalty:NAME`` on every
sample, so ``verigym eval`` reports per detector how often it fired (``summary.json``
``penalties``) and ``verigym train`` logs ``penalty/NAME`` in ``metrics.jsonl``. A detector that
errors (a judge that is down) is recorded and masked: never rewarded, never penalised. The
detectors are those of ``verigym.graders.hacking``; ``verigym eval --penalty NAME[=AMOUNT]`` adds
one from the command line. ``verigym.envs.prepare.prepare_env`` puts them on an environment.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from verigym.policies.spec import MissingApiKey, ModelSpec, make_policy
from verigym.rubric import Penalty

__all__ = [
    "DETECTOR_NAMES",
    "PenaltySpec",
    "RubricSpec",
    "build_penalty",
    "parse_penalty_flag",
]

Detector = Literal[
    "hedged_answer", "copied_answer", "network_attempts", "protected_edits", "deleted_tests", "cheat_judge"
]
DETECTOR_NAMES: tuple[str, ...] = (
    "hedged_answer",
    "copied_answer",
    "network_attempts",
    "protected_edits",
    "deleted_tests",
    "cheat_judge",
)


class PenaltySpec(BaseModel):
    """One ``[[rubric.penalties]]`` entry. ``base_url``/``model``/``api_key_env`` are for ``cheat_judge``."""

    model_config = ConfigDict(extra="forbid")

    detector: Detector
    amount: Annotated[float, Field(ge=0.0)] = 1.0
    name: str | None = None  # the key in metrics (default: the detector's name)
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    timeout: Annotated[float, Field(gt=0.0)] = 120.0

    @model_validator(mode="after")
    def _judge_needs_url(self) -> PenaltySpec:
        if self.detector == "cheat_judge" and not self.base_url:
            raise ValueError("detector cheat_judge needs base_url (an OpenAI-compatible judge endpoint)")
        if self.detector != "cheat_judge" and (self.base_url or self.model):
            raise ValueError(f"detector {self.detector} takes no base_url/model (only cheat_judge does)")
        return self

    @property
    def key(self) -> str:
        return self.name or self.detector


class RubricSpec(BaseModel):
    """The ``[rubric]`` table of eval and train configs."""

    model_config = ConfigDict(extra="forbid")

    penalties: list[PenaltySpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> RubricSpec:
        keys = [p.key for p in self.penalties]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"two penalties named {dup[0]!r}: give one of them a name")
        return self


def build_penalty(spec: PenaltySpec) -> Penalty:
    """The ``Penalty`` for one entry (a cheat judge talks to ``spec.base_url``)."""
    from verigym.graders import hacking

    if spec.detector == "cheat_judge":
        assert spec.base_url is not None
        model = ModelSpec(  # httpx: no aiohttp session left open after the run
            model=spec.model,
            base_url=[spec.base_url],
            api_key_env=spec.api_key_env,
            timeout=spec.timeout,
            max_retries=2,
            transport="sdk-httpx",
        )
        try:
            judge = make_policy(model)
        except MissingApiKey as exc:
            raise ValueError(f"rubric.penalties {spec.key}: {exc}") from None
        grader = hacking.cheat_judge(judge, name=spec.key, timeout=spec.timeout)
    else:
        factory = getattr(hacking, spec.detector)
        grader = factory(name=spec.key)
    return Penalty(grader=grader, amount=spec.amount)


def parse_penalty_flag(value: str) -> PenaltySpec:
    """``--penalty NAME[=AMOUNT]`` as a ``PenaltySpec`` (a cheat judge needs a config file)."""
    name, _, amount = value.partition("=")
    name = name.strip()
    if name not in DETECTOR_NAMES or name == "cheat_judge":
        known = ", ".join(n for n in DETECTOR_NAMES if n != "cheat_judge")
        raise ValueError(
            f"--penalty {value}: unknown detector {name!r}; choose one of {known} "
            "(cheat_judge needs base_url: use [[rubric.penalties]] in --config)"
        )
    try:
        size = float(amount) if amount else 1.0
    except ValueError:
        raise ValueError(f"--penalty {value}: the amount after '=' must be a number") from None
    if size < 0:
        raise ValueError(f"--penalty {value}: the amount must be ≥ 0")
    return PenaltySpec(detector=name, amount=size)  # type: ignore[arg-type]
