"""``verigym select`` end to end on a tiny local model (small N), and its bad-input errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from verigym.cli import app
from verigym.policies.tiny import create


def test_select_cli_end_to_end_on_tiny_model(tmp_path: Path) -> None:
    model = create("tiny", tmp_path / "model", seed=1)
    out = tmp_path / "run"
    args = [
        "select",
        "arithmetic",
        "--model",
        str(model),
        "-N",
        "4",
        "--ns",
        "1,2,4",
        "-n",
        "2",
        "--max-tokens",
        "12",
        "--judge-max-tokens",
        "8",
        "--method",
        "majority,deepconf-online",
        "--method",
        "genselect",
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["methods"]) == ["majority", "deepconf-online", "genselect"]
    assert [r["n"] for r in summary["methods"]["genselect"]] == [1, 2, 4]
    # an untrained model rarely ends its answer within 12 tokens: GenSelect drops truncated
    # candidates; and it cannot write "Judgment: IDX", so any window it judged is a counted fallback
    gs = summary["methods"]["genselect"][-1]
    assert gs["dropped_per_task"] > 0 and gs["fallbacks"] == gs["selector_calls"]
    assert len((out / "results.jsonl").read_text().splitlines()) == 2 * 4
    html = (out / "report.html").read_text()
    assert "accuracy vs tokens" not in html or "data:image/png" in html
    assert "sub" in summary["notes"]["subsampling"] and "deepconf-online" in result.output


def test_select_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(app, ["select", "arithmetic", "--method", "vote", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "--method 'vote'" in bad.output and "Traceback" not in bad.output
    bad_ns = runner.invoke(app, ["select", "arithmetic", "-N", "4", "--ns", "1,8"])
    assert bad_ns.exit_code == 2 and "--ns" in bad_ns.output
    unknown = runner.invoke(app, ["select", "no-such-env", "--model", str(tmp_path)])
    assert unknown.exit_code == 2 and "no-such-env" in unknown.output
