"""Mode ``exact_decimal:N`` in floats, for references the exact path does not read as a rational
(``\\pi``, ``\\sqrt{2}``): the full check's ``_check._exact_decimal`` without sympy.

The full check first requires the answer to be written with exactly N decimal places (any
reference, once both sides parse), then rounds the reference's 60-digit value half up at N places
and compares. Here both sides must be read by the float path (so the full parser reads them too);
the pattern is checked as written; the reference's value comes with an error bound
(``_bounded``), and the rounding is decided only when the value is far from a tie beyond that
bound. Anything else returns None and the full check decides.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from verigym.graders.math._float_path._bounded import Unsure
from verigym.graders.math._float_path._sampled import _value
from verigym.graders.math._float_path._sampledexpr import Expr
from verigym.graders.math._shared._norm import clean, split_decor
from verigym.graders.math._shared._rules import Answers, Verdict

__all__ = ["float_exact_decimal"]


def float_exact_decimal(ans: Answers, places: int) -> Verdict | None:
    """The full check's verdict in mode ``exact_decimal:places``, or None."""
    if ans.boxes > 1 or places > 12:
        return None
    gv, pv = _value(ans.gold), _value(ans.answer)
    if gv is None or pv is None:
        return None  # the full parser's readings are not known here
    core, _ = split_decor(clean(ans.answer))
    written = core.replace(",", "")
    if not re.fullmatch(r"-?\d+" + (rf"\.\d{{{places}}}" if places else ""), written):
        return False, f"not written with exactly {places} decimal places", ans.answer
    literals, g = gv
    if literals or not isinstance(g, Expr) or g.names or g.cplx or g.pct or g.deg:
        return None
    try:
        v = g.at({})
    except Unsure:
        return None
    if v.cx or v.z.imag != 0:
        return None
    scale = 10.0**places
    t = v.z.real * scale + 0.5
    err = (v.e + 1e-15 * abs(v.z.real)) * scale * 4 + 1e-9
    k = math.floor(t)
    if t - k <= err or k + 1 - t <= err:
        return None  # too close to a tie to round in floats
    if Fraction(written) * 10**places != k:
        return False, f"not the reference rounded to {places} places", ans.answer
    return True, "the reference rounded to the required places", ans.answer
