"""Rubric trees for the LLM judge: criteria with points, hierarchical nodes with weights.

A leaf group of criteria is scored as in HealthBench (Arora et al. 2025): Σ points of met
criteria / Σ positive points, clipped to [0, 1]. A criterion with negative points describes
undesirable behaviour; it is "met" when the bad thing happened, and then subtracts. A parent
node's score is the weighted mean of its children's scores, as in PaperBench (Starace et al.
2025).

Accepted input forms (``parse_rubric``):

- a list of criteria: ``[{"criterion": str, "points": float}, ...]`` (``"text"`` or
  ``"requirements"`` may stand for ``"criterion"``; ``points`` defaults to 1);
- a node: ``{"name"?, "weight"?, "criteria": [...]}`` or ``{"name"?, "weight"?, "children": [...]}``
  (``"sub_tasks"`` may stand for ``"children"``, PaperBench's name);
- a PaperBench leaf: ``{"requirements": str, "weight": float}`` with no sub-tasks (one criterion).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Criterion", "RubricNode", "parse_rubric", "score_node"]

_TEXT_KEYS = ("criterion", "text", "requirements")


@dataclass(frozen=True)
class Criterion:
    """One thing the judge decides: ``text`` and its ``points`` (negative = undesirable)."""

    text: str
    points: float = 1.0
    id: str = ""


@dataclass(frozen=True)
class RubricNode:
    """Either a group of ``criteria`` or a list of weighted ``children`` (not both)."""

    name: str = "rubric"
    weight: float = 1.0
    criteria: tuple[Criterion, ...] = ()
    children: tuple[RubricNode, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if bool(self.criteria) == bool(self.children):
            raise ValueError(f"rubric node {self.name!r} needs either criteria or children (exactly one)")
        if self.weight < 0:
            raise ValueError(f"rubric node {self.name!r} has a negative weight {self.weight}")
        if self.criteria and not any(c.points > 0 for c in self.criteria):
            raise ValueError(f"rubric node {self.name!r} has no criterion with positive points")
        if self.children and not sum(c.weight for c in self.children) > 0:
            raise ValueError(f"rubric node {self.name!r}: children weights sum to 0")

    def leaves(self) -> list[Criterion]:
        """Every criterion of the tree, depth first."""
        if self.criteria:
            return list(self.criteria)
        return [c for child in self.children for c in child.leaves()]


def _criterion(obj: Any, where: str) -> Criterion:
    if isinstance(obj, Criterion):
        return obj
    if isinstance(obj, str):
        return Criterion(text=obj, id=where)
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: a criterion must be an object or a string, got {type(obj).__name__}")
    text = next((obj[k] for k in _TEXT_KEYS if k in obj), None)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where}: a criterion needs a non-empty 'criterion' text")
    try:
        points = float(obj.get("points", 1.0))
    except (TypeError, ValueError):
        raise ValueError(f"{where}: 'points' must be a number, got {obj.get('points')!r}") from None
    return Criterion(text=text, points=points, id=str(obj.get("id", where)))


def parse_rubric(obj: Any, *, where: str = "rubric") -> RubricNode:
    """A ``RubricNode`` from the forms listed in the module docstring; ``ValueError`` names the field."""
    if isinstance(obj, RubricNode):
        return obj
    if isinstance(obj, Sequence) and not isinstance(obj, str):
        items = list(obj)
        if not items:
            raise ValueError(f"{where}: empty rubric")
        return RubricNode(
            name=where, criteria=tuple(_criterion(c, f"{where}[{i}]") for i, c in enumerate(items))
        )
    if not isinstance(obj, Mapping):
        raise ValueError(
            f"{where}: a rubric must be a list of criteria or an object, got {type(obj).__name__}"
        )
    name = str(obj.get("name", obj.get("id", where)))
    weight = float(obj.get("weight", 1.0))
    children = obj.get("children", obj.get("sub_tasks")) or []
    if children:
        kids = tuple(parse_rubric(c, where=f"{where}/{i}") for i, c in enumerate(children))
        return RubricNode(name=name, weight=weight, children=kids)
    if "criteria" in obj:
        node = parse_rubric(obj["criteria"], where=name)
        return RubricNode(name=name, weight=weight, criteria=node.criteria)
    return RubricNode(name=name, weight=weight, criteria=(_criterion(obj, name),))


def score_node(node: RubricNode, met: Sequence[bool]) -> float:
    """The node's score given one met/not-met flag per leaf criterion, in ``node.leaves()`` order."""
    if len(met) != len(node.leaves()):
        raise ValueError(f"need {len(node.leaves())} verdicts, got {len(met)}")
    return _score(node, iter(met))


def _score(node: RubricNode, met: Iterator[bool]) -> float:
    if node.criteria:
        flags = [next(met) for _ in node.criteria]
        positive = sum(c.points for c in node.criteria if c.points > 0)
        got = sum(c.points for c, f in zip(node.criteria, flags, strict=True) if f)
        return min(1.0, max(0.0, got / positive))
    total = sum(c.weight for c in node.children)
    return sum(c.weight * _score(c, met) for c in node.children) / total
