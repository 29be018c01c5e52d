"""Agreement of a judge with human labels: precision, recall, F1 and accuracy ("met" = positive)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["JudgeAgreement", "judge_agreement"]


@dataclass(frozen=True)
class JudgeAgreement:
    n: int
    tp: int
    fp: int
    fn: int
    tn: int
    precision: float
    recall: float
    f1: float
    accuracy: float
    errors: int = 0


def judge_agreement(predicted: Sequence[bool], human: Sequence[bool]) -> JudgeAgreement:
    """A judge's "met" calls against human labels; undefined ratios are reported as 0."""
    if len(predicted) != len(human):
        raise ValueError(f"{len(predicted)} predictions for {len(human)} human labels")
    pairs = list(zip(predicted, human, strict=True))
    tp = sum(p and h for p, h in pairs)
    fp = sum(p and not h for p, h in pairs)
    fn = sum(h and not p for p, h in pairs)
    tn = len(pairs) - tp - fp - fn
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = (tp + tn) / len(pairs) if pairs else 0.0
    return JudgeAgreement(len(pairs), tp, fp, fn, tn, precision, recall, f1, accuracy)
