"""The typed summaries of a run folder's ``summary.json``: one model per kind of run.

Every field a summary may lack (an older verigym did not write it) has a default, and fields this
model does not name are kept (``extra="allow"``: env metrics, a trainer's ``eval/ENV/...`` keys), so
``EvalSummary.model_validate(json.load(f))`` reads every summary ever written. The numbers are the
fold's (``verigym.record.Aggregate``); a statistic of nothing scored is None.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from verigym.record._header import RunHeader

__all__ = ["EvalSummary", "SelectSummary", "Summary", "TrainSummary"]


class _Summary(BaseModel):
    model_config = ConfigDict(extra="allow")

    format_version: int | None = None  # None: written before run records were versioned
    run: RunHeader | None = None
    wall_s: float | None = None
    non_finite: dict[str, str] = Field(default_factory=dict)  # paths of numbers written as null

    def extra(self) -> dict[str, Any]:
        """The fields this model does not name (as written)."""
        return dict(self.__pydantic_extra__ or {})


class EvalSummary(_Summary):
    """``verigym eval``'s ``summary.json`` (``Aggregate.summary`` plus the run's notes)."""

    n_tasks: int = 0
    n_samples: int = 0
    n_scored: int = 0
    n_errors: int = 0
    n_expected: int | None = None
    empty_answers: int = 0
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    first_error: str | None = None
    error_examples: dict[str, str] = Field(default_factory=dict)  # each kind's first reason
    reward_mean: float | None = None
    reward_ci95: list[float | None] | None = None
    success_threshold: float = 1.0
    pass_at_k: dict[str, float | None] = Field(default_factory=dict)
    grader_means: dict[str, float | None] = Field(default_factory=dict)
    penalties: dict[str, dict[str, Any]] = Field(default_factory=dict)
    penalty_mean: float | None = None
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    completion_tokens_mean: float | None = None
    completion_tokens_max: int | None = None
    truncation_rate: float | None = None
    prefix_breaks: dict[str, int] = Field(default_factory=dict)
    tool_call_parse_failures: int = 0
    tool_call_parse_failure_rate: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    env_args: dict[str, Any] = Field(default_factory=dict)
    env_args_from: dict[str, str] = Field(default_factory=dict)
    env_metrics: dict[str, Any] = Field(default_factory=dict)


class TrainSummary(_Summary):
    """``verigym train``'s ``summary.json`` (and ``verigym sft``'s ``sft_summary.json``): held-out pass@1
    at each stage, step counts, the training samples' errors, where the model went. Per-environment
    held-out numbers (``eval/ENV/pass_at_1``, ``..._initial``) are extra fields."""

    pass_at_1_initial: float | None = None
    pass_at_1_after_sft: float | None = None
    pass_at_1_after_rl: float | None = None
    pass_at_1: float | None = None  # sft_summary.json: after SFT
    steps: int | None = None
    sft_steps: int | None = None
    train_samples: int | None = None
    train_samples_errored: int | None = None
    train_first_error: str | None = None
    warning: str | None = None
    model_dir: str | None = None


class SelectSummary(_Summary):
    """``verigym select``'s ``summary.json``: each method's accuracy and tokens at each N, the oracle
    pass@N, the comparisons with majority vote, and the samples' errors."""

    env: str = ""
    model: str = ""
    judge: str | None = None
    tasks: int = 0
    samples: int = 0
    ns: list[int] = Field(default_factory=list)
    draws: int | None = None
    seed: int | None = None
    success_threshold: float = 1.0
    sample_errors: int = 0
    samples_total: int | None = None
    first_error: str | None = None
    methods: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    oracle_pass_at_n: list[dict[str, float]] = Field(default_factory=list)
    vs_majority_at_equal_tokens: list[dict[str, Any]] = Field(default_factory=list)
    deepconf_online_vs_majority: list[dict[str, Any]] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


Summary = EvalSummary | TrainSummary | SelectSummary
