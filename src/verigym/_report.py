"""Self-contained HTML reports: matplotlib figures embedded as base64 PNGs, tables, sections.

Used by eval, train, select and quality reports so they all look the same. matplotlib is imported
by ``figure()``, not here: a report without figures (the eval report draws inline SVG) should not pay
its second of import time.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verigym._files import write_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["HtmlReport", "figure"]


def figure(width: float = 6.0, height: float = 3.5) -> Figure:
    """A new matplotlib figure that needs no display (no pyplot state)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="tight")


_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
th{background:#f4f4f4}pre{background:#f7f7f7;padding:8px;white-space:pre-wrap;max-height:30em;overflow:auto}
details{margin:.5em 0}.ok{color:#070}.bad{color:#a00}.err{color:#b60}img,svg{max-width:100%}svg{display:block;margin:1em 0}
"""


class HtmlReport:
    """Build a page section by section, then ``write(path)`` (one file, no external assets)."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._parts: list[str] = []

    def heading(self, text: str, level: int = 2) -> None:
        self._parts.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def paragraph(self, text: str) -> None:
        self._parts.append(f"<p>{html.escape(text)}</p>")

    def table(self, rows: Sequence[Sequence[Any]], header: Sequence[str] | None = None) -> None:
        out = ["<table>"]
        if header:
            out.append("<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>")
        for row in rows:
            out.append("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in row) + "</tr>")
        out.append("</table>")
        self._parts.append("".join(out))

    def image(self, fig: Figure, alt: str = "") -> None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        data = base64.b64encode(buf.getvalue()).decode()
        self._parts.append(f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">')

    def details(self, summary: str, body: str, css: str = "") -> None:
        """A collapsible block; ``body`` is shown preformatted."""
        cls = f' class="{css}"' if css else ""
        self._parts.append(
            f"<details><summary{cls}>{html.escape(summary)}</summary><pre>{html.escape(body)}</pre></details>"
        )

    def raw(self, fragment: str) -> None:
        """Trusted HTML written by verigym itself (never model output)."""
        self._parts.append(fragment)

    def render(self) -> str:
        body = "\n".join(self._parts)
        return (
            f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(self.title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(self.title)}</h1>\n{body}\n</body></html>"
        )

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        write_atomic(path, self.render())
        return path


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
