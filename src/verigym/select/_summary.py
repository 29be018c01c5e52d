"""``summary.json`` and ``report.html`` of a ``verigym select`` run, and the comparisons in them:
each method against majority vote at equal tokens, and DeepConf-online against majority@N.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verigym._files import write_json
from verigym._report import HtmlReport, figure
from verigym.select.run import MethodPoint

__all__ = ["build_summary", "majority_at_tokens", "write_report", "write_summary"]

SUBSAMPLING_NOTE = (
    "Samples were drawn once, at the largest N; each smaller N is measured on up to {draws} disjoint "
    "random subsets of that pool (in sample order), averaged. All methods see the same subsets."
)
TOKENS_NOTE = (
    "tokens per task = completion tokens of every trace a method generated (DeepConf-online: warm-up "
    "traces in full, the others up to their cut) + every token a selector or reward model read and wrote."
)
ONLINE_NOTE = (
    "DeepConf-online is replayed on traces sampled in full: a trace's cut depends only on its prefix, "
    "so the tokens counted are those a generation loop with OnlineDeepConf produces for the same seeds."
)


def majority_at_tokens(curve: Sequence[MethodPoint], tokens: float) -> float | None:
    """Majority's accuracy at ``tokens``, interpolated linearly in log(tokens) between its points;
    None outside the range it was measured on."""
    pts = sorted((p.tokens, p.accuracy) for p in curve if p.tokens > 0)
    if not pts or tokens <= 0 or tokens < pts[0][0] * (1 - 1e-9) or tokens > pts[-1][0] * (1 + 1e-9):
        return None
    for (t0, a0), (t1, a1) in itertools.pairwise(pts):
        if t0 <= tokens <= t1:
            if t1 == t0:
                return max(a0, a1)
            f = (math.log(tokens) - math.log(t0)) / (math.log(t1) - math.log(t0))
            return a0 + f * (a1 - a0)
    return pts[0][1] if math.isclose(tokens, pts[0][0]) else pts[-1][1]


def _verdict(acc: float, tokens: float, ref: float | None, majority: Sequence[MethodPoint]) -> str:
    if ref is None:
        if not majority:
            return "majority not measured"
        top = max(majority, key=lambda p: p.tokens)
        if tokens > top.tokens and acc <= top.accuracy + 1e-9:
            return f"does NOT beat majority (majority@{top.n} is as good with fewer tokens)"
        if tokens > top.tokens:
            return f"beats majority@{top.n}, but with more tokens than majority was run with"
        return "below majority's token range"
    if acc > ref + 1e-9:
        return "beats majority"
    if acc < ref - 1e-9:
        return "does NOT beat majority"
    return "ties majority"


def build_summary(
    points: Mapping[str, Sequence[MethodPoint]],
    oracle: Sequence[Mapping[str, float]],
    meta: Mapping[str, Any],
) -> dict[str, Any]:
    """The JSON summary: per-method curves, pass@N, and the comparisons (with verdicts)."""
    majority = list(points.get("majority", ()))
    comparisons = []
    for method, curve in points.items():
        if method == "majority":
            continue
        for p in curve:
            ref = majority_at_tokens(majority, p.tokens) if majority else None
            comparisons.append(
                {
                    "method": method,
                    "n": p.n,
                    "accuracy": p.accuracy,
                    "tokens_per_task": p.tokens,
                    "majority_accuracy_at_equal_tokens": ref,
                    "verdict": _verdict(p.accuracy, p.tokens, ref, majority),
                }
            )
    online = []
    by_n = {p.n: p for p in majority}
    for p in points.get("deepconf-online", ()):
        m = by_n.get(p.n)
        if m is None:
            continue
        online.append(
            {
                "n": p.n,
                "online_accuracy": p.accuracy,
                "majority_accuracy": m.accuracy,
                "online_tokens": p.tokens,
                "majority_tokens": m.tokens,
                "tokens_saved_pct": 100.0 * (1 - p.tokens / m.tokens) if m.tokens else 0.0,
                "reaches_majority_with_fewer_tokens": p.accuracy >= m.accuracy - 1e-9 and p.tokens < m.tokens,
            }
        )
    return {
        **meta,
        "methods": {m: [p.as_dict() for p in curve] for m, curve in points.items()},
        "oracle_pass_at_n": list(oracle),
        "vs_majority_at_equal_tokens": comparisons,
        "deepconf_online_vs_majority": online,
        "notes": {
            "subsampling": SUBSAMPLING_NOTE.format(draws=meta.get("draws", "?")),
            "tokens": TOKENS_NOTE,
            "deepconf_online": ONLINE_NOTE,
        },
    }


def write_summary(out: Path, summary: Mapping[str, Any]) -> Path:
    path = out / "summary.json"
    write_json(path, dict(summary), default=str)
    return path


def write_report(out: Path, summary: Mapping[str, Any]) -> Path:
    """report.html: accuracy against tokens (log scale) and against N, tables, notes."""
    report = HtmlReport(f"verigym select — {summary.get('env', '')}")
    report.paragraph(
        f"model: {summary.get('model', '')} · tasks: {summary.get('tasks')} · "
        f"samples per task: {summary.get('samples')} · sample errors: {summary.get('sample_errors', 0)}"
    )
    methods: Mapping[str, list[dict[str, Any]]] = summary["methods"]
    oracle = summary.get("oracle_pass_at_n", [])
    fig = figure(7.0, 4.0)
    ax = fig.add_subplot(1, 2, 1)
    for name, rows in methods.items():
        ax.plot([r["tokens_per_task"] for r in rows], [r["accuracy"] for r in rows], marker="o", label=name)
        for r in rows:
            ax.annotate(str(r["n"]), (r["tokens_per_task"], r["accuracy"]), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("tokens per task")
    ax.set_ylabel("accuracy")
    ax.set_title("accuracy vs tokens (labels: N)")
    ax.legend(fontsize=7)
    bx = fig.add_subplot(1, 2, 2)
    for name, rows in methods.items():
        bx.plot([r["n"] for r in rows], [r["accuracy"] for r in rows], marker="o", label=name)
    if oracle:
        bx.plot([o["n"] for o in oracle], [o["pass_at_n"] for o in oracle], "k--", label="pass@N (oracle)")
    bx.set_xscale("log", base=2)
    bx.set_xlabel("samples N")
    bx.set_title("accuracy vs N")
    bx.legend(fontsize=7)
    report.image(fig, "accuracy against tokens and against N")
    report.heading("Methods")
    table = [
        [
            name,
            r["n"],
            f"{r['accuracy']:.3f}",
            f"{r['tokens_per_task']:.0f}",
            r["fallbacks"],
            r["no_answer"],
            f"{r.get('tokens_saved_per_task', 0.0):.0f}",
        ]
        for name, rs in methods.items()
        for r in rs
    ]
    report.table(
        table, ["method", "N", "accuracy", "tokens/task", "fallbacks", "no answer", "tokens saved/task"]
    )
    if oracle:
        report.table([[o["n"], f"{o['pass_at_n']:.3f}"] for o in oracle], ["N", "pass@N (oracle ceiling)"])
    comps = summary.get("vs_majority_at_equal_tokens", [])
    if comps:
        report.heading("Against majority vote at equal tokens")
        report.table(
            [
                [
                    c["method"],
                    c["n"],
                    f"{c['accuracy']:.3f}",
                    "—"
                    if c["majority_accuracy_at_equal_tokens"] is None
                    else f"{c['majority_accuracy_at_equal_tokens']:.3f}",
                    c["verdict"],
                ]
                for c in comps
            ],
            ["method", "N", "accuracy", "majority at same tokens", "verdict"],
        )
    online = summary.get("deepconf_online_vs_majority", [])
    if online:
        report.heading("DeepConf-online against majority@N")
        report.table(
            [
                [
                    o["n"],
                    f"{o['online_accuracy']:.3f}",
                    f"{o['majority_accuracy']:.3f}",
                    f"{o['tokens_saved_pct']:.1f}%",
                    o["reaches_majority_with_fewer_tokens"],
                ]
                for o in online
            ],
            ["N", "online acc", "majority acc", "tokens saved", "reaches majority with fewer tokens"],
        )
    report.heading("How this was measured")
    for note in summary.get("notes", {}).values():
        report.paragraph(str(note))
    if summary.get("deepconf_online_mode"):
        report.paragraph(f"deepconf-online mode: {summary['deepconf_online_mode']}")
    for line in summary.get("warnings", []):
        report.paragraph(f"warning: {line}")
    return report.write(out / "report.html")
