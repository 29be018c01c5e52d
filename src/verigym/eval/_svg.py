"""Small charts for ``report.html`` as inline SVG: a histogram, horizontal bars and a line (pass@k).

The eval report draws them itself rather than through matplotlib: importing matplotlib and
rendering two PNGs took about a second at the end of every ``verigym eval`` (more than the
rollouts of a 1,000-sample run against a fast server) and ~40 MiB of memory.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["hbars_svg", "histogram_svg", "line_svg"]

_W, _H = 560, 240  # plot area in px
_L, _B, _T, _R = 56, 40, 28, 16  # margins: left (y labels), bottom (x labels), top (title), right


def _text(x: float, y: float, s: str, anchor: str = "middle", size: int = 12) -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}">{html.escape(s)}</text>'


def _svg(width: float, height: float, parts: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{html.escape(label)}" '
        f'width="{width:.0f}" height="{height:.0f}" font-family="sans-serif">' + "".join(parts) + "</svg>"
    )


def _tick(v: float) -> str:
    return f"{v:.3g}"


def histogram_svg(
    counts: Sequence[int], edges: Sequence[float], *, title: str, xlabel: str, ylabel: str
) -> str:
    """Bars of ``counts`` over the bins ``edges`` (one more edge than counts)."""
    top = max(counts, default=0) or 1
    lo, hi = edges[0], edges[-1]
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return _L + (v - lo) / span * _W

    parts = [_text(_L + _W / 2, 18, title, size=13)]
    for n, a, b in zip(counts, edges, edges[1:], strict=False):
        h = n / top * _H
        parts.append(
            f'<rect x="{x(a):.1f}" y="{_T + _H - h:.1f}" width="{max(x(b) - x(a) - 1, 1):.1f}" '
            f'height="{h:.1f}" fill="#4477aa"><title>[{_tick(a)}, {_tick(b)}): {n}</title></rect>'
        )
    base = _T + _H
    parts.append(f'<line x1="{_L}" y1="{base}" x2="{_L + _W}" y2="{base}" stroke="#333"/>')
    parts.append(f'<line x1="{_L}" y1="{_T}" x2="{_L}" y2="{base}" stroke="#333"/>')
    for i in range(5):
        v = lo + span * i / 4
        parts.append(_text(x(v), base + 16, _tick(v)))
        parts.append(_text(_L - 6, base - _H * i / 4 + 4, _tick(top * i / 4), anchor="end"))
    parts.append(_text(_L + _W / 2, base + 34, xlabel))
    parts.append(
        _text(14, _T + _H / 2, ylabel, size=12).replace(
            "<text ", f'<text transform="rotate(-90 14 {_T + _H / 2:.1f})" '
        )
    )
    return _svg(_L + _W + _R, _T + _H + _B, parts, title)


def hbars_svg(items: Sequence[tuple[str, float]], *, xlabel: str) -> str:
    """One horizontal bar per ``(label, value)``, top to bottom; the axis spans [0, max(1, values)]."""
    row = 24
    left = 8 + 7 * max((len(name) for name, _ in items), default=4)
    top = max([1.0, *(v for _, v in items)])
    height = row * len(items)
    parts = []
    for i, (name, value) in enumerate(items):
        y = 8 + i * row
        w = max(value, 0.0) / top * _W
        parts.append(_text(left - 6, y + row * 0.65, name, anchor="end"))
        parts.append(
            f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" fill="#66aa55">'
            f"<title>{html.escape(name)}: {_tick(value)}</title></rect>"
        )
        parts.append(_text(left + w + 4, y + row * 0.65, _tick(value), anchor="start", size=11))
    base = 8 + height
    parts.append(f'<line x1="{left}" y1="{base}" x2="{left + _W}" y2="{base}" stroke="#333"/>')
    for i in range(5):
        parts.append(_text(left + _W * i / 4, base + 16, _tick(top * i / 4)))
    parts.append(_text(left + _W / 2, base + 34, xlabel))
    return _svg(left + _W + 48, base + _B, parts, xlabel)


def line_svg(points: Sequence[tuple[float, float]], *, title: str, xlabel: str, ylabel: str) -> str:
    """A line through ``points`` (x ascending) with a marker and its value at each; y spans [0, 1]."""
    xs = [p[0] for p in points]
    lo, hi = min(xs, default=0.0), max(xs, default=1.0)
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return _L + (v - lo) / span * _W

    def y(v: float) -> float:
        return _T + _H - max(0.0, min(1.0, v)) * _H

    base = _T + _H
    parts = [_text(_L + _W / 2, 18, title, size=13)]
    parts.append(f'<line x1="{_L}" y1="{base}" x2="{_L + _W}" y2="{base}" stroke="#333"/>')
    parts.append(f'<line x1="{_L}" y1="{_T}" x2="{_L}" y2="{base}" stroke="#333"/>')
    for i in range(5):
        parts.append(_text(_L - 6, base - _H * i / 4 + 4, _tick(i / 4), anchor="end"))
    path = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in points)
    parts.append(f'<polyline points="{path}" fill="none" stroke="#4477aa" stroke-width="2"/>')
    for a, b in points:
        parts.append(
            f'<circle cx="{x(a):.1f}" cy="{y(b):.1f}" r="4" fill="#4477aa"><title>{_tick(b)}</title></circle>'
        )
        parts.append(_text(x(a), y(b) - 9, _tick(b), size=11))
        parts.append(_text(x(a), base + 16, f"{a:g}"))
    parts.append(_text(_L + _W / 2, base + 34, xlabel))
    parts.append(
        _text(14, _T + _H / 2, ylabel, size=12).replace(
            "<text ", f'<text transform="rotate(-90 14 {_T + _H / 2:.1f})" '
        )
    )
    return _svg(_L + _W + _R, _T + _H + _B, parts, title)
