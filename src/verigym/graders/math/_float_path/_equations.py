"""Equations in floats, for the float path (``_sampledcmp``): the full check's other readings of an
equation (``_compare._eqn_eq``) on the sides as the own reader reads them, no sympy.

Past the named value, the full check accepts an equation answer when its sides are proportional
to the reference's (``_ratio_const``: ``lhs - rhs`` of both at five points, the ratios equal within
1e-8), and a plain answer when, put in for a variable the equation is linear in, it satisfies the
equation (``_satisfies``: both sides sampled as ``_numeric.sample`` samples); it also tries the
solved variable of a named side (``_solves``), and reads ``expr = simplified`` as the value
``simplified`` (``_identity_value``). Here each rule is evaluated at the full check's points with
error bounds (``_bounded``), and decides only where the floats vouch for its outcome:

* free symbols are the reader's names, each checked to change the value (sympy cancels ``x - x``
  as it builds a tree, so a name that changes nothing may be missing from its free symbols);
* "linear in ``y``" is read from the code's structure (``y`` only in sums, in products and under
  non-negative integer powers, a degree bound of 1 and ``y`` changing the value: degree exactly 1),
  and "not linear" from a second difference in ``y`` well above the error bound;
* ``_solves`` accepts only when sympy's substituted tree is exactly 0, which floats cannot see: it
  is decided here only when the substituted difference is clearly not 0 (then it rejects).

One inequality in one variable with the variable on both sides (``3^x \\ge x^2``, which the full
check hands to ``solveset``) is accepted against the same relation (the same code tree and sign)
and rejected against one whose truth differs at a real point, when ``_rel_norm``'s fallback (for
a chain solveset cannot solve) would reject it too (``ineq_eq``).

Anything else raises ``Unsure`` and the full check decides.
"""

from __future__ import annotations

import ast
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from verigym.graders.math._float_path._bounded import Bounded, Unsure
from verigym.graders.math._float_path._sampledexpr import _VOUCH, Expr, evaluate, points

__all__ = [
    "Fn",
    "Ineq",
    "changes",
    "ineq_eq",
    "linear_in",
    "nonzero",
    "ratio_const",
    "relevant",
    "sample",
    "side",
    "sides_fn",
    "substituted",
]

Fn = Callable[[dict[str, Bounded]], Bounded]  # a value at a point (names to bounded values)


def side(e: Expr) -> Fn:
    """``e`` as a function of bounded values by name (``Expr.at`` takes plain floats)."""
    if e.cplx or e.ren or e.deg or e.dec:
        raise Unsure

    def at(vals: dict[str, Bounded]) -> Bounded:
        env: dict[str, Bounded] = {c: vals[c] for c in e.reading.letters}
        env.update({ident: vals[name] for ident, name in e.reading.symbols.items()})
        return evaluate(e.code, env)

    return at


def sides_fn(lhs: Expr, rhs: Expr) -> Fn:
    """``lhs - rhs``."""
    a, b = side(lhs), side(rhs)
    return lambda vals: a(vals) - b(vals)


def substituted(f: Fn, y: str, value: Fn) -> Fn:
    """``f`` with ``value`` put in for ``y`` (``xreplace``)."""
    return lambda vals: f({**vals, y: value(vals)})


def _floats(pt: dict[str, float]) -> dict[str, Bounded]:
    return {k: Bounded(v, 0.0) for k, v in pt.items()}


def _vouched(v: Bounded) -> complex:
    if v.cx or v.e > _VOUCH * abs(v.z):
        raise Unsure  # near zero, cancellation, complex arithmetic: the bound cannot vouch
    return v.z


def relevant(f: Fn, names: set[str]) -> set[str]:
    """``names``, each checked to change ``f``'s value (so they are sympy's free symbols), or
    ``Unsure``."""
    base = _base(names)
    v0 = f(_floats(base))
    for n in base:
        v1 = f(_floats({**base, n: base[n] + 0.61}))
        if abs(v1.z - v0.z) <= 10 * (v0.e + v1.e) + 1e-9 * max(abs(v0.z), abs(v1.z)):
            raise Unsure
    return names


def _base(names: set[str]) -> dict[str, float]:
    return {n: 1.3 + 0.173 * k for k, n in enumerate(sorted(names))}  # generic, distinct


def changes(f: Fn, names: set[str], n: str) -> bool:
    """``n`` clearly changes ``f``'s value (so it is among sympy's free symbols); False when that
    cannot be seen (not evaluable, or too small a change)."""
    base = _base(names)
    try:
        v0 = f(_floats(base))
        v1 = f(_floats({**base, n: base[n] + 0.61}))
    except Unsure:
        return False
    return abs(v1.z - v0.z) > 10 * (v0.e + v1.e) + 1e-9 * max(abs(v0.z), abs(v1.z))


def nonzero(f: Fn, names: set[str]) -> bool:
    """``f`` (sympy's tree ``rest`` of ``_compare._solves``) is not 0 where ``_numeric.sample``
    first evaluates it, whichever of ``names`` sympy kept as free symbols (each one that changes
    the value is kept; the others may have cancelled): True, or ``Unsure``."""
    kept = {n for n in names if changes(f, names, n)}
    maybe = sorted(names - kept)
    if len(maybe) > 3:
        raise Unsure
    base = {n: 1.1 for n in names}
    for k in range(len(maybe) + 1):
        for extra in itertools.combinations(maybe, k):
            syms = sorted(kept | set(extra))
            pt = points(syms, 1, 1234)[0] if syms else {}
            v = f(_floats({**base, **pt}))
            if not abs(v.z) > 10 * v.e + 1e-12:
                raise Unsure
    return True


def ratio_const(d1: Fn, names1: set[str], d2: Fn, names2: set[str]) -> bool:
    """``_compare._ratio_const``: ``d1 / d2`` the same nonzero number at five points."""
    s1, s2 = relevant(d1, names1), relevant(d2, names2)
    if s1 != s2 or not s1:
        return False
    ratios = []
    for pt in points(sorted(s1), 5, 99):
        vals = _floats(pt)
        a, b = _vouched(d1(vals)), _vouched(d2(vals))
        if abs(b) < 1e-9:
            raise Unsure  # the full check skips |b| < 1e-12 points: too close to call
        ratios.append(a / b)
    if abs(ratios[0]) < 1e-9:
        raise Unsure
    spread = max(abs(r - ratios[0]) / max(abs(r), abs(ratios[0])) for r in ratios)
    if spread <= 1e-10:
        return True
    if spread > 1e-6:
        return False
    raise Unsure


def sample(a: Fn, b: Fn, syms: list[str]) -> bool:
    """``_numeric.sample(a, b, syms)`` is True / not True (``Unsure`` where floats cannot vouch):
    equal at the six positive points, and not different at the negative ones where both are real."""
    if not syms:
        raise Unsure
    for pt in points(syms, 6, 1234):
        vals = _floats(pt)
        fa, fb = a(vals), b(vals)
        if fa.cx or fb.cx or (fa.e + fb.e) > _VOUCH * max(abs(fa.z), abs(fb.z)):
            raise Unsure
        diff, scale = abs(fa.z - fb.z), max(abs(fa.z), abs(fb.z))
        if diff > 1e-6 * scale:
            return False
        if diff > 1e-10 * scale:
            raise Unsure
    for pt in points(syms, 3, 4321):
        vals = _floats({s: -v for s, v in pt.items()})
        fa, fb = a(vals), b(vals)
        if (fa.e + fb.e) > _VOUCH * max(abs(fa.z), abs(fb.z)):
            raise Unsure
        if abs(fa.z.imag) > 1e-6 * abs(fa.z) or abs(fb.z.imag) > 1e-6 * abs(fb.z):
            continue  # a complex value: the rule compares only real ones
        diff, scale = abs(fa.z - fb.z), max(abs(fa.z), abs(fb.z))
        if diff <= 1e-10 * scale:
            continue
        if fa.cx or fb.cx or diff <= 1e-6 * scale:
            raise Unsure  # the full check may see a value that is not real there
        return False
    return True


@functools.lru_cache(maxsize=4096)
def _degree(code: str, ident: str) -> int | None:
    """An upper bound on the degree of the reader's ``code`` as a polynomial in the name
    ``ident``; None when it is not built as one (``ident`` inside a function, a denominator or an
    exponent)."""
    try:
        tree = ast.parse(code, mode="eval").body
    except SyntaxError:
        return None
    return _deg(tree, ident)


def _deg(node: ast.AST, ident: str) -> int | None:
    if isinstance(node, ast.Name):
        return 1 if node.id == ident else 0
    if isinstance(node, ast.Constant):
        return 0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        return _deg(node.operand, ident)
    if isinstance(node, ast.Call):
        inner = [_deg(a, ident) for a in node.args]
        return 0 if all(d == 0 for d in inner) and not node.keywords else None
    if not isinstance(node, ast.BinOp):
        return None
    left, right = _deg(node.left, ident), _deg(node.right, ident)
    if left is None or right is None:
        return None
    if isinstance(node.op, ast.Add | ast.Sub):
        return max(left, right)
    if isinstance(node.op, ast.Mult):
        return left + right
    if isinstance(node.op, ast.Div):
        return left if right == 0 else None
    if isinstance(node.op, ast.Pow):
        if left == 0 and right == 0:
            return 0
        k = _int_literal(node.right)
        return left * k if right == 0 and k is not None and k >= 0 else None
    return None


def _int_literal(node: ast.AST) -> int | None:
    """``_n('3')`` (perhaps in parentheses): a non-negative integer literal of the reader."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "_n"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and node.args[0].value.isdigit()
    ):
        return int(node.args[0].value)
    return None


def _ident(e: Expr, name: str) -> str | None:
    if name in e.reading.letters:
        return name
    found = [ident for ident, n in e.reading.symbols.items() if n == name]
    return found[0] if found else None


def linear_in(lhs: Expr, rhs: Expr, d: Fn, free: set[str], y: str, at: dict[str, float]) -> bool:
    """``_compare._linear_in(lhs - rhs, y)`` for ``y`` one of the difference's free symbols
    (``free``): True when the code is a polynomial of degree at most 1 in ``y`` (so exactly 1);
    False when the difference is clearly not affine in ``y`` near ``at``; else ``Unsure``."""
    degrees = []
    for e in (lhs, rhs):
        ident = _ident(e, y)
        degrees.append(0 if ident is None else _degree(e.reading.code, ident))
    if all(k is not None and k <= 1 for k in degrees) and y in free:
        return True
    base = _floats({n: at.get(n, 1.1) for n in free})
    ys = (0.7, 1.3, 2.1)
    vals = [d({**base, y: Bounded(t, 0.0)}) for t in ys]
    err = sum(v.e for v in vals)
    if any(v.cx for v in vals):
        raise Unsure
    s1 = (vals[1].z - vals[0].z) / (ys[1] - ys[0])
    s2 = (vals[2].z - vals[1].z) / (ys[2] - ys[1])
    if abs(s2 - s1) > 1e-6 * max(abs(s1), abs(s2), 1.0) + 10 * err:
        return False  # not affine in y: not a polynomial of degree 1
    raise Unsure


@dataclass(frozen=True)
class Ineq:  # _values.Rel of one inequality in one variable that is not alone on a side
    lhs: Expr
    op: str  # "<", ">", "\\le", "\\ge"
    rhs: Expr
    var: str


@functools.lru_cache(maxsize=4096)
def _tree(code: str) -> str:
    return ast.dump(ast.parse(code, mode="eval"))


_WITNESSES = (-3.7, -2.3, -1.3, -0.6, -0.2, 0.3, 0.7, 1.1, 1.9, 2.6, 3.3, 4.4)


def ineq_eq(g: Ineq, p: Ineq) -> bool:
    """``_compare._rel_eq`` of two inequalities in one variable each: the same sympy relation
    (the same reading, the same sign) is the same set. Two whose truth differs at a real point are
    different sets (``rel_to_set``), and they are rejected when the fallback for a chain solveset
    cannot solve (``_rel_norm``: the same kind of sign, sides' differences equal or positively
    proportional) rejects them too; anything else ``Unsure``."""
    if _key(g) == _key(p):
        return True
    if not any(
        (a := _holds(g, x)) is not None and (b := _holds(p, x)) is not None and a != b for x in _WITNESSES
    ):
        raise Unsure
    if _strict(g) != _strict(p):
        return False
    if g.var != p.var:
        raise Unsure  # the fallback may rename a parameter
    d1, d2 = _difference(g), _difference(p)
    if sample(d1, d2, [g.var]) or ratio_const(d1, {g.var}, d2, {p.var}):
        raise Unsure
    return False


def _strict(i: Ineq) -> bool:
    return i.op in ("<", ">")


def _difference(i: Ineq) -> Fn:
    """``_compare._rel_norm``'s side difference: ``rhs - lhs`` for ``<``, ``lhs - rhs`` for ``>``."""
    return sides_fn(i.rhs, i.lhs) if i.op in ("<", "\\le") else sides_fn(i.lhs, i.rhs)


def _key(i: Ineq) -> tuple[object, ...]:
    """The relation as sympy builds it: the sides' code trees (parentheses aside) and the sign."""
    return tuple(
        (_tree(e.reading.code), e.reading.letters, tuple(sorted(e.reading.symbols.items())))
        for e in (i.lhs, i.rhs)
    ) + (i.op,)


def _holds(i: Ineq, x: float) -> bool | None:
    """The inequality at ``var = x``, when both sides are real there and apart beyond their bounds."""
    try:
        a, b = i.lhs.at({i.var: x}), i.rhs.at({i.var: x})
    except Unsure:
        return None
    if a.cx or b.cx:
        return None
    d = a.z.real - b.z.real
    if abs(d) <= 10 * (a.e + b.e) + 1e-9 * (abs(a.z) + abs(b.z)):
        return None
    return d < 0 if i.op in ("<", "\\le") else d > 0
