"""Policy losses as registered, typed parts: each loss a name, an options model and a function.

``rl.loss`` names a registered loss and ``rl.loss_options`` holds its options (``RLConfig``); the
update calls ``get_loss(cfg.loss)(inputs, cfg.loss_options)`` (``train._update``), so a loss that is
not registered is a config error, never a silent fallback. The built-in losses (formulas and papers
in ``train.losses``):

- ``ppo``: ``PPOOptions`` (``eps_low``, ``eps_high``, ``dual_clip``, ``delta``) -> ``ppo_clip_loss``
- ``gspo``: ``GSPOOptions`` (``eps_low``, ``eps_high``) -> ``gspo_loss``
- ``clip_cov``: ``ClipCovOptions`` (+ ``clip_cov_ratio``, ``clip_cov_lb``, ``clip_cov_ub``) ->
  ``clip_cov_loss``
- ``kl_cov``: ``KLCovOptions`` (``kl_cov_ratio``, ``kl_cov_beta``) -> ``kl_cov_loss``

A config spells a loss either as a table, ``loss = {kind = "gspo", eps_low = 3e-4}``, or as the
name and flat keys, ``loss = "gspo"`` and ``eps_low = 3e-4`` beside it (every option name is also a
flat ``rl`` key, unless ``RLConfig`` has a field of that name). A flat key overrides the table (so
``--set rl.eps_high=0.3`` works with either form); flat keys the chosen loss does not take are
ignored, as presets set clip ranges for whichever loss runs; a table's keys must be the loss's own.
In a config file a table without ``kind`` (``--set rl.loss.eps_high=…``) is the preset's loss.

Adding a loss: its function, an options model (a ``LossOptions``) and one ``register_loss`` call,
in one module: this one for a built-in, or a module of yours imported before the config is validated
(``verigym train`` imports none of yours). Nothing else lists losses: the config and the update read
``LOSSES``. ``docs/architecture.md`` ("Worked examples") has a complete one, tested as written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from verigym.registry import Registry, UnknownNameError
from verigym.train import losses as L

__all__ = [
    "DEFAULT_LOSS",
    "LOSSES",
    "ClipCovOptions",
    "GSPOOptions",
    "KLCovOptions",
    "LossConfig",
    "LossInputs",
    "LossOptions",
    "LossSpec",
    "PPOOptions",
    "UnknownLossError",
    "get_loss",
    "loss_options",
    "normalize_loss",
    "register_loss",
    "table_keys",
]

DEFAULT_LOSS = "ppo"


class LossOptions(BaseModel):
    """The base of every loss's options model (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


@dataclass(frozen=True)
class LossInputs:
    """What every policy loss sees: (B, T) logprobs now and at sampling, advantages (B,) or (B, T),
    the (B, T) model-token mask, and the update's generator (for losses that draw, e.g. Clip-Cov)."""

    logp: torch.Tensor
    old: torch.Tensor
    adv: torch.Tensor
    mask: torch.Tensor
    generator: torch.Generator | None = None


Opts = TypeVar("Opts", bound=LossOptions)


@dataclass(frozen=True)
class LossSpec(Generic[Opts]):
    """A registered loss: its name, its options model and ``fn(inputs, options) -> PolicyLoss``."""

    name: str
    options: type[Opts]
    fn: Callable[[LossInputs, Opts], L.PolicyLoss]

    def __call__(self, inputs: LossInputs, options: LossOptions) -> L.PolicyLoss:
        if not isinstance(options, self.options):
            raise TypeError(f"loss {self.name!r} takes {self.options.__name__}, not {type(options).__name__}")
        return self.fn(inputs, options)


class UnknownLossError(UnknownNameError):
    """No policy loss has this name (``[rl] loss``)."""


LOSSES: Registry[LossSpec[Any]] = Registry("loss", error=UnknownLossError)
"""Every registered loss by name (``register_loss``; a ``verigym.registry.Registry``: the built-ins,
registered at the bottom of this module, then a user's or a ``verigym.plugins`` package's)."""


def register_loss(
    name: str, options: type[Opts], fn: Callable[[LossInputs, Opts], L.PolicyLoss]
) -> LossSpec[Opts]:
    """Register a policy loss under ``name``; a name registered twice is an error."""
    spec = LossSpec(name, options, fn)
    LOSSES.register(name, spec, replace=False)
    return spec


def get_loss(name: str) -> LossSpec[Any]:
    """The registered loss ``name``; an unknown name is ``UnknownLossError`` (a ``ValueError``)
    listing the registered ones."""
    return LOSSES.get(name)


def loss_options(name: str, value: Any) -> LossOptions:
    """``value`` (a dict, or a model) as loss ``name``'s options model; a problem is one
    ``ValueError`` line naming the key (and, for an unknown key, the keys the loss takes)."""
    model: type[LossOptions] = get_loss(name).options
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = "".join(f"{p}: " for p in err["loc"])
        if err["type"] == "extra_forbidden":
            takes = ", ".join(model.model_fields) or "no options"
            raise ValueError(f"{where}unknown key (loss {name} takes {takes})") from None
        raise ValueError(where + err["msg"].removeprefix("Value error, ")) from None


def _option_names() -> set[str]:
    return {k for spec in LOSSES.values() for k in spec.options.model_fields}


def table_keys(rl: dict[str, Any]) -> set[str]:
    """The option keys a raw ``rl`` table gives in its ``loss`` table or ``loss_options`` (these
    override a preset's flat keys of the same names)."""
    keys: set[str] = set()
    for value in (rl.get("loss"), rl.get("loss_options")):
        if isinstance(value, dict):
            keys |= set(value) - {"kind"}
    return keys


def normalize_loss(data: dict[str, Any], *, reserved: set[str]) -> dict[str, Any]:
    """``RLConfig``'s raw input with its loss as ``loss`` (the name) and ``loss_options`` (a dict,
    or the model as it is): from a ``{kind = ...}`` table, ``loss_options``, and flat keys (those
    in ``reserved``, ``RLConfig``'s own fields, stay where they are). Precedence, lowest first: the
    options model's defaults, ``loss_options``, the table, flat keys."""
    data = dict(data)
    loss = data.get("loss", DEFAULT_LOSS)
    table: dict[str, Any] = {}
    if isinstance(loss, dict):
        table = dict(loss)
        if "kind" not in table:
            raise ValueError('a loss table needs its kind, e.g. loss = {kind = "ppo", eps_high = 0.28}')
        loss = table.pop("kind")
    flat = {k: data.pop(k) for k in _option_names() - reserved if k in data}
    data["loss"] = loss
    spec = LOSSES.find(loss) if isinstance(loss, str) else None
    if spec is None:  # the field's own check names the problem
        data.pop("loss_options", None)
        return data
    fields = spec.options.model_fields
    stored = data.get("loss_options", {})
    merged = {**table, **{k: v for k, v in flat.items() if k in fields}}
    if isinstance(stored, LossOptions):  # assignment re-validates: a model, keeping what applies
        if type(stored) is not spec.options or merged:
            kept = {k: v for k, v in stored.model_dump().items() if k in fields}
            data["loss_options"] = loss_options(loss, {**kept, **merged})
        return data
    data["loss_options"] = {**stored, **merged}
    return data


class _ClipRange(LossOptions):
    eps_low: float = 0.2
    eps_high: float = 0.2


class PPOOptions(_ClipRange):
    """PPO-clip per token (clip-higher when ``eps_high`` ≠ ``eps_low``), optional dual clip and
    two-sided clip ``delta``."""

    dual_clip: float | None = None
    delta: float | None = None

    @model_validator(mode="after")
    def _check(self) -> PPOOptions:
        if self.delta is not None and self.delta <= 1 + self.eps_high:
            raise ValueError("delta must exceed 1 + eps_high")
        if self.dual_clip is not None and self.dual_clip <= 1:
            raise ValueError("dual_clip must exceed 1")
        return self


class GSPOOptions(_ClipRange):
    """GSPO's sequence-level ratio clip (its preset sets ``eps_low``/``eps_high`` to 3e-4/4e-4)."""


class ClipCovOptions(_ClipRange):
    """Clip-Cov: PPO-clip, and the gradient of a random ``clip_cov_ratio`` of the tokens whose
    covariance lies in (``clip_cov_lb``, ``clip_cov_ub``) is zeroed."""

    clip_cov_ratio: float = 2e-4
    clip_cov_lb: float = 1.0
    clip_cov_ub: float = 5.0


class KLCovOptions(LossOptions):
    """KL-Cov: unclipped −Aρ, plus ``kl_cov_beta``·|log ρ| on the top ``kl_cov_ratio`` of tokens by
    covariance."""

    kl_cov_ratio: float = 2e-3
    kl_cov_beta: float = 1.0


def _ppo(x: LossInputs, o: PPOOptions) -> L.PolicyLoss:
    return L.ppo_clip_loss(
        x.logp, x.old, x.adv, eps_low=o.eps_low, eps_high=o.eps_high, dual_clip=o.dual_clip, delta=o.delta
    )


def _gspo(x: LossInputs, o: GSPOOptions) -> L.PolicyLoss:
    return L.gspo_loss(x.logp, x.old, x.adv, x.mask, eps_low=o.eps_low, eps_high=o.eps_high)


def _clip_cov(x: LossInputs, o: ClipCovOptions) -> L.PolicyLoss:
    return L.clip_cov_loss(
        x.logp, x.old, x.adv, x.mask, eps_low=o.eps_low, eps_high=o.eps_high, clip_ratio=o.clip_cov_ratio,
        cov_lb=o.clip_cov_lb, cov_ub=o.clip_cov_ub, generator=x.generator,
    )  # fmt: skip


def _kl_cov(x: LossInputs, o: KLCovOptions) -> L.PolicyLoss:
    return L.kl_cov_loss(x.logp, x.old, x.adv, x.mask, k_ratio=o.kl_cov_ratio, beta=o.kl_cov_beta)


register_loss("ppo", PPOOptions, _ppo)
register_loss("gspo", GSPOOptions, _gspo)
register_loss("clip_cov", ClipCovOptions, _clip_cov)
register_loss("kl_cov", KLCovOptions, _kl_cov)


class LossConfig(BaseModel):
    """The loss fields of ``RLConfig``: ``loss``, a registered name (anything else is an error at
    validation), and ``loss_options``, that loss's own options model, from a ``{kind = ...}``
    table, ``loss_options`` or flat keys (``normalize_loss``)."""

    loss: str = DEFAULT_LOSS
    loss_options: SerializeAsAny[LossOptions] = Field(default_factory=PPOOptions)

    @model_validator(mode="before")
    @classmethod
    def _loss_table(cls, data: Any) -> Any:
        return normalize_loss(data, reserved=set(cls.model_fields)) if isinstance(data, dict) else data

    @field_validator("loss")
    @classmethod
    def _registered(cls, value: str) -> str:
        get_loss(value)  # an unregistered name is an error here, not a fallback at the update
        return value

    @field_validator("loss_options", mode="before")
    @classmethod
    def _options(cls, value: Any, info: ValidationInfo) -> Any:
        # the loss's own model; when the loss name failed, its error is the one reported
        return loss_options(info.data["loss"], value) if "loss" in info.data else LossOptions()

    @property
    def eps_low(self) -> float | None:
        """The loss's lower clip range (``loss_options.eps_low``; None for a loss without one)."""
        return getattr(self.loss_options, "eps_low", None)

    @property
    def eps_high(self) -> float | None:
        """The loss's upper clip range (``loss_options.eps_high``; None for a loss without one)."""
        return getattr(self.loss_options, "eps_high", None)
