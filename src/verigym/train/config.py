"""The training config: one TOML file (model, environments, sampling, SFT, RL, logging), validated by
pydantic, with named RL presets and ``section.key=value`` overrides.

Unknown keys are errors naming the key. An ``[rl]`` table's ``preset`` supplies defaults; keys
written in the file override the preset, and overrides (CLI flags) override both.

Presets (the data in ``presets.py``; formulas and papers in ``losses.py`` / ``advantages.py`` /
``shaping.py`` / ``group_filters.py``):
``grpo`` (DeepSeekMath: group std, seq-mean-token-mean, β=0.04), ``dr_grpo`` (no std, constant
normaliser), ``dapo`` (clip-higher 0.2/0.28, dynamic sampling, token-mean, soft overlong, no KL),
``opo`` (length-weighted baseline, exact on-policy), ``skywork`` (adaptive entropy), ``lead``
(GRPO-LEAD length reward + difficulty weights), ``clip_cov``, ``kl_cov``, ``gspo``, ``opd`` (DAPO +
on-policy distillation from ``rl.distill.teacher``).

Multi-grader and exploration knobs (off by default, so every preset trains as before):
``rl.ranking`` (``lexicographic`` | ``pareto``: advantages from each sample's rank in its group
on the grader vector, ``train.ranking``), ``rl.group_variants`` (fill groups from rewritten /
guided / tool-variant prompts) and ``rl.param_noise`` (noise on the sampler's weights), both in
``train.exploration``.

``[rl.distill]`` (``DistillConfig``, ``train.distill``): on-policy distillation from a teacher,
added to the verified-reward advantage with a coefficient and a schedule; ``opd`` is the DAPO
preset with the balance measured in ``benchmarks/distill.py``.
"""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from verigym._files import FileProblem, read_toml
from verigym._numbers import first_bad_number
from verigym.graders.penalties import RubricSpec
from verigym.policies.spec import ModelSpec, check_tool_format
from verigym.tools.mcp_config import ToolsSpec
from verigym.train.advantages import AdvantageEstimator, GraderAggregation, Scale
from verigym.train.exploration import GroupVariantsConfig
from verigym.train.loss_registry import LossConfig, table_keys
from verigym.train.losses import Aggregation
from verigym.train.presets import PRESETS
from verigym.train.ranking import Ranking

__all__ = [
    "PRESETS",
    "ConfigError",
    "DistillConfig",
    "EnvConfig",
    "EvalConfig",
    "GroupVariantsConfig",
    "LoggingConfig",
    "LoraConfig",
    "ModelConfig",
    "RLConfig",
    "SFTConfig",
    "SamplingConfig",
    "ScaleConfig",
    "Schedule",
    "TrainConfig",
    "apply_overrides",
    "load_config",
    "schedule_value",
]

# A constant, or piecewise-linear points [[step, value], ...] (held constant outside them).
Schedule = float | list[tuple[int, float]]


class ConfigError(ValueError):
    """A config problem, phrased as one line naming the file and key."""


def schedule_value(schedule: Schedule, step: int) -> float:
    """The value of a schedule at ``step``."""
    if isinstance(schedule, int | float):
        return float(schedule)
    points = sorted(schedule)
    if step <= points[0][0]:
        return float(points[0][1])
    for (s0, v0), (s1, v1) in itertools.pairwise(points):
        if step <= s1:
            return float(v0 + (v1 - v0) * (step - s0) / max(s1 - s0, 1))
    return float(points[-1][1])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LoraConfig(_Strict):
    r: Annotated[int, Field(gt=0)] = 8
    alpha: Annotated[int, Field(gt=0)] = 16
    dropout: Annotated[float, Field(ge=0, lt=1)] = 0.0
    target_modules: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj"]


class ModelConfig(_Strict):
    """``path``: a saved checkpoint directory; or ``tiny``: the size of a fresh tiny model to build."""

    path: str | None = None
    tiny: str | None = "tiny"
    seed: int = 0
    lora: LoraConfig | None = None
    # the one rule (``policies.spec.ModelSpec``): auto is bfloat16 on CUDA, float32 elsewhere
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    device: str = "auto"
    tool_format: str | None = None  # rollouts' and SFT's tool-call format (None: the tokenizer's)

    @field_validator("tool_format")
    @classmethod
    def _tool_format(cls, value: str | None) -> str | None:
        return check_tool_format(value)


class EnvConfig(_Strict):
    name: str
    weight: Schedule = 1.0
    args: dict[str, Any] = {}
    # task selection: a `verigym profile` output seeds the online difficulty estimates; `band`
    # keeps only tasks whose profiled pass rate lies strictly inside it; `task_ids` keeps only those
    profile: str | None = None
    band: tuple[float, float] | None = None
    task_ids: list[str] | None = None
    # the user's own agent program as this env's harness (``verigym.agents``): FILE.py:FUNC or a command
    agent: str | None = None
    agent_cmd: str | None = None
    agent_timeout_s: Annotated[float, Field(gt=0)] = 300.0
    on_error: Literal["error", "truncate"] = "error"

    @model_validator(mode="after")
    def _check_band(self) -> EnvConfig:
        if self.band is not None and self.profile is None:
            raise ValueError(
                f"envs.{self.name}: band needs a profile (a profile.jsonl from `verigym profile`)"
            )
        return self


class SamplingConfig(_Strict):
    temperature: Annotated[float, Field(gt=0)] = 1.0
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0
    max_tokens: Annotated[int, Field(gt=0)] = 16


class SFTConfig(_Strict):
    data: str | None = None  # results.jsonl of an eval, or a JSONL of {"messages": [...]}
    demos: Annotated[int, Field(ge=0)] = 0  # or: this many verified oracle demonstrations from the envs
    epochs: Annotated[int, Field(gt=0)] = 1
    max_steps: Annotated[int, Field(ge=0)] = 0  # 0: run the epochs
    batch_size: Annotated[int, Field(gt=0)] = 16
    grad_accum: Annotated[int, Field(gt=0)] = 1
    lr: Annotated[float, Field(gt=0)] = 2e-3
    lr_schedule: Literal["constant", "linear", "cosine"] = "cosine"
    warmup_steps: Annotated[int, Field(ge=0)] = 0
    weight_decay: float = 0.0
    packing: bool = False  # several rows per sequence, block-diagonal attention
    pack_length: Annotated[int, Field(gt=0)] = 512
    eval_every: Annotated[int, Field(ge=0)] = 0
    target_pass_at_1: float | None = None  # stop once a held-out eval reaches this (light SFT)
    target_greedy: bool = False  # that check decodes greedily, whatever [eval] samples


class DistillConfig(_Strict):
    """On-policy distillation (``train.distill``, formulas and papers there).

    ``teacher``: a ``ModelSpec`` (a path / run directory / catalogue name as a string, or a table
    with ``base_url`` for a served teacher that returns prompt logprobs, e.g. ``verigym serve``);
    ``teacher_recipe``: a train config run first when ``teacher`` names no model yet (the teacher
    is then that run's output). ``coef`` × ``schedule``(step) weighs the teacher term, decaying to
    ``final_coef`` over ``decay_steps`` (default ``rl.steps``); ``reward_coef`` weighs the verified
    advantage (0: pure distillation). ``divergence``: ``reverse_kl`` (a per-token advantage) or
    ``jsd`` (GKD's generalised JSD with ``beta`` as a loss; in-process teacher, no packing).
    ``exclude_passed``: samples the verifier passed get no teacher term. With a teacher term,
    dynamic sampling keeps groups whose rewards are all equal (the teacher still teaches there).
    """

    teacher: ModelSpec | None = None
    teacher_recipe: str | None = None
    coef: Annotated[float, Field(ge=0)] = 1.0
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    final_coef: Annotated[float, Field(ge=0)] = 0.0
    decay_steps: Annotated[int | None, Field(gt=0)] = None
    reward_coef: Annotated[float, Field(ge=0)] = 1.0
    divergence: Literal["reverse_kl", "jsd"] = "reverse_kl"
    beta: Annotated[float, Field(ge=0, le=1)] = 0.5
    exclude_passed: bool = False

    @field_validator("teacher", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"model": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check(self) -> DistillConfig:
        if self.divergence == "jsd" and self.teacher is not None and self.teacher.served:
            raise ValueError("divergence jsd needs the teacher's whole distribution: an in-process teacher")
        return self


class RLConfig(LossConfig, _Strict):
    """The ``[rl]`` table. ``loss`` and its typed ``loss_options`` come from ``LossConfig``
    (``train.loss_registry``: ``loss = {kind = ...}`` or the name with flat keys)."""

    preset: str = "grpo"
    steps: Annotated[int, Field(gt=0)] = 50
    groups_per_step: Annotated[int, Field(gt=0)] = 8
    group_size: Annotated[int, Field(gt=1)] = 8
    # advantages
    advantage: AdvantageEstimator = "grpo"
    scale_rewards: Scale = "group"
    adv_eps: float = 1e-6
    grader_weights: dict[str, Schedule] = {}
    grader_aggregation: GraderAggregation = "sum_then_normalize"
    lead_difficulty: bool = False
    # relative ranking on the grader vector (train.ranking); "none": the weighted reward
    ranking: Ranking = "none"
    ranking_priority: list[str] = []  # lexicographic order of graders (the rest: by weight)
    # loss: `loss` and `loss_options`, from LossConfig (a registered loss and its typed options)
    aggregation: Aggregation = "seq-mean-token-mean"
    kl_beta: Annotated[float, Field(ge=0)] = 0.0
    entropy_coef: float = 0.0
    adaptive_entropy: bool = False
    entropy_target: float = 0.2
    entropy_delta: float = 1e-4
    entropy_coef_max: float = 0.005
    # optimisation
    lr: Annotated[float, Field(gt=0)] = 1e-3
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: Annotated[int, Field(ge=0)] = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    num_iterations: Annotated[int, Field(gt=0)] = 1
    minibatches: Annotated[int, Field(gt=0)] = 1
    grad_accum: Annotated[int, Field(gt=0)] = 1
    micro_batch_rows: Annotated[int, Field(gt=0)] = 256  # rows per forward/backward (memory bound)
    share_prefix: bool = True  # run a group's shared prompt once per micro-batch
    packing: bool = False  # micro-batches of ≤ pack_tokens tokens, rows end to end (train.packing)
    pack_tokens: Annotated[int, Field(gt=0)] = 512
    # sampling-side recipes
    dynamic_sampling: bool = False
    max_rounds: Annotated[int, Field(gt=0)] = 3
    difficulty_low: float = 0.0
    difficulty_high: float = 1.0
    difficulty_window: Annotated[int, Field(gt=0)] = 4
    overlong_buffer: Annotated[float, Field(ge=0)] = 0.0  # DAPO L_cache: tokens, or a share of max_tokens
    truncation: Literal["none", "mask", "penalty"] = "none"
    truncation_penalty: float = -1.0
    lead_length_reward: bool = False
    lead_alpha: float = 0.05
    token_cost: float = 0.0
    shuffle_rewards: bool = False  # a control: shuffle rewards across the batch (should not learn)
    # exploration (train.exploration)
    group_variants: GroupVariantsConfig | None = None
    param_noise: Schedule = 0.0  # σ of the sampler's weight noise, relative to each tensor's std
    distill: DistillConfig | None = None  # on-policy distillation from a teacher (train.distill)
    # pipeline
    queue_size: Annotated[int, Field(gt=0)] = 1
    eval_every: Annotated[int, Field(ge=0)] = 0
    # a step whose loss, gradient or advantages are not finite is skipped; this many in a row stop the run
    max_skipped_steps: Annotated[int, Field(gt=0)] = 3

    @model_validator(mode="after")
    def _check(self) -> RLConfig:
        if not 0 <= self.difficulty_low <= self.difficulty_high <= 1:
            raise ValueError("difficulty_low ≤ difficulty_high must lie in [0, 1]")
        gv = self.group_variants
        if gv is not None and gv.total > self.group_size:
            raise ValueError(
                f"group_variants ask for {gv.total} variant samples but group_size is {self.group_size}"
            )
        if gv is not None and gv.guide and not gv.guides:
            raise ValueError("group_variants.guide needs at least one guide in group_variants.guides")
        noise = (
            [self.param_noise]
            if isinstance(self.param_noise, int | float)
            else [v for _, v in self.param_noise]
        )
        if any(v < 0 for v in noise):
            raise ValueError("param_noise must be ≥ 0")
        if self.ranking_priority and self.ranking != "lexicographic":
            raise ValueError('ranking_priority needs ranking = "lexicographic"')
        if self.distill is not None and self.distill.divergence == "jsd" and self.packing:
            raise ValueError("distill.divergence jsd does not run with packing = true")
        return self


class EvalConfig(_Strict):
    """Held-out evaluation (``split="test"`` of each environment): pass@1 = mean of reward ≥ 1."""

    tasks: Annotated[int, Field(gt=0)] = 200
    samples: Annotated[int, Field(gt=0)] = 1
    temperature: Annotated[float, Field(ge=0)] = 0.0  # 0: greedy


class LoggingConfig(_Strict):
    checkpoint_every: Annotated[int, Field(ge=0)] = 0  # 0: only at the end
    tensorboard: bool = False
    wandb: bool = False
    report: bool = True
    # groups of each RL step kept in rollouts_sample.jsonl for `verigym view` (train.rollouts); 0: none
    rollout_groups: Annotated[int, Field(ge=0)] = 2

    @field_validator("tensorboard", "wandb")
    @classmethod
    def _installed(cls, value: bool, info: ValidationInfo) -> bool:
        """Asking for a logger that is not installed is an error at start, not a silent no-op."""
        package = {"tensorboard": "tensorboard", "wandb": "wandb"}[str(info.field_name)]
        if value and importlib.util.find_spec(package) is None:
            raise ValueError(f"{package} is not installed: pip install {package}, or set it to false")
        return value


class ScaleConfig(_Strict):
    """Scale-out (``verigym.scale``, docs/scaling.md); the defaults train in one process."""

    # async off-policy: generate ≤ d steps ahead (--async)
    max_staleness: Annotated[int | None, Field(ge=0)] = None
    tis_cap: Annotated[float, Field(ge=0)] = 2.0  # token-level truncated importance weight cap (0: off)
    # mask sequences whose IS ratio leaves [1/T, T] (0: off)
    mask_threshold: Annotated[float, Field(ge=0)] = 0.0
    correct_fresh: bool = False  # also correct on-policy samples (inference/training mismatch)
    servers: list[str] = []  # OpenAI-compatible base URLs to sample from (--remote)
    weight_push: Literal["auto", "lora", "checkpoint"] = "auto"
    push_retries: Annotated[int, Field(ge=0)] = 5
    served_name: str = "verigym-policy"
    ray: bool = False  # rollouts and graders on Ray (--ray [ADDRESS])
    ray_address: str | None = None
    ray_workers: Annotated[int, Field(gt=0)] = 2
    ray_max_inflight: Annotated[int, Field(gt=0)] = 8
    parallel: Literal["ddp", "fsdp"] = "ddp"  # under torchrun; fsdp shards params, grads, AdamW state

    @model_validator(mode="after")
    def _check(self) -> ScaleConfig:
        if 0 < self.mask_threshold <= 1:
            raise ValueError("mask_threshold must be 0 (off) or greater than 1")
        return self


class TrainConfig(_Strict):
    seed: int = 0
    out_dir: str = "runs/train"
    model: ModelConfig = Field(default_factory=ModelConfig)
    envs: list[EnvConfig] = Field(default_factory=lambda: [EnvConfig(name="arithmetic")])
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    rl: RLConfig = Field(default_factory=RLConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    scale: ScaleConfig = Field(default_factory=lambda: ScaleConfig())
    rubric: RubricSpec = Field(default_factory=RubricSpec)  # [[rubric.penalties]] for every env
    tools: ToolsSpec = Field(default_factory=ToolsSpec)  # [[tools.mcp]] for every tool env

    @model_validator(mode="after")
    def _finite(self) -> TrainConfig:
        """Every number finite and within float32 range (``rl.lr = inf`` or ``1e300`` would train
        NaN weights): one error naming the key."""
        bad = first_bad_number(self)
        if bad is not None:
            raise ValueError(bad)
        return self


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Set dotted keys (``rl.lr``, ``model.lora.r``) in a raw config dict (copy-on-write)."""
    out = _deep_copy(raw)
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        node = out
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {dotted}: {part!r} is not a table")
            node = child
        node[parts[-1]] = value
    return out


def _deep_copy(d: dict[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, dict) else v for k, v in d.items()}


def build_config(raw: dict[str, Any], *, source: str = "config") -> TrainConfig:
    """Validate a raw dict (preset applied under ``rl``); errors name ``source`` and the key."""
    raw = _deep_copy(raw)
    rl = raw.get("rl", {})
    if isinstance(rl, dict):
        preset = rl.get("preset", "grpo")
        if preset not in PRESETS:
            raise ConfigError(
                f"{source}: rl.preset: unknown preset {preset!r}; choose one of {sorted(PRESETS)}"
            )
        given = table_keys(rl)  # loss options the file gives in a table beat the preset's flat keys
        merged = {**{k: v for k, v in PRESETS[preset].items() if k not in given}, **rl, "preset": preset}
        for key, value in PRESETS[preset].items():  # a preset's sub-table and the file's merge
            if isinstance(value, dict) and isinstance(rl.get(key), dict):
                merged[key] = {**value, **rl[key]}
        if isinstance(rl.get("loss"), dict) and "kind" not in rl["loss"]:  # e.g. --set rl.loss.eps_high=…
            merged["loss"] = {"kind": PRESETS[preset].get("loss", LossConfig().loss), **rl["loss"]}
        raw["rl"] = merged
    try:
        return TrainConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{source}: {key}: {msg}" if key else f"{source}: {msg}") from None


def load_config(path: str | Path | None, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Read a TOML file (or start from defaults when ``path`` is None) and apply overrides."""
    raw: dict[str, Any] = {}
    source = "config"
    if path is not None:
        p = Path(path)
        source = str(p)
        try:
            raw = read_toml(p, source)
        except FileProblem as exc:
            raise ConfigError(str(exc)) from None
    return build_config(apply_overrides(raw, overrides or {}), source=source)
