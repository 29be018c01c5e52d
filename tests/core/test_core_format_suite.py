"""The strict format family reproduces every label of its suite through `verigym verifier-bench`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from verigym.cli import app

SUITE = Path(__file__).resolve().parents[1] / "suites" / "format.jsonl"


def test_format_suite_has_no_misses() -> None:
    result = CliRunner().invoke(
        app, ["verifier-bench", "--grader", "format", "--suite", str(SUITE), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["n"] >= 30 and report["errors"] == 0
    assert report["fp_rate"] == 0.0 and report["fn_rate"] == 0.0 and report["misses"] == []
