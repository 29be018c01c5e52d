"""The ``with_units`` rule (the reference's unit, percent or degree sign is required), shared by
the full check (``_sympy_path._check``) and the in-process paths (``_equivalence._fast``); no
sympy."""

from __future__ import annotations

import re

from verigym.graders.math._shared._norm import clean, split_decor

__all__ = ["units_match"]


def _unit_key(u: str) -> str:
    u = u.replace("^", "").replace(" ", "")
    return re.sub(r"(?<=[a-z]{2})s\b", "", u)


def units_match(gold: str, answer: str) -> tuple[bool, str]:
    """(True, "") when ``answer`` carries the unit, percent and degree signs of ``gold``; else
    (False, what is wrong)."""
    _, gd = split_decor(clean(gold))
    _, pd = split_decor(clean(answer))
    if gd.percent != pd.percent:
        return False, "percent sign required" if gd.percent else "unexpected percent sign"
    if gd.degree != pd.degree:
        return False, "degree sign required" if gd.degree else "unexpected degree sign"
    if _unit_key(gd.unit) != _unit_key(pd.unit):
        return False, f"unit {pd.unit or 'missing'!r}, expected {gd.unit or 'none'!r}"
    return True, ""
