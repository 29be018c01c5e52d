"""verifier-bench: suite validation, rates, errors, pluggable families and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verigym.cli import app
from verigym.graders.bench import BenchError, load_family, run_bench

runner = CliRunner()


def _suite(tmp_path: Path, lines: list[dict[str, object]]) -> Path:
    path = tmp_path / "suite.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


LINES: list[dict[str, object]] = [
    {"id": "a", "gold": "2", "pred": r"\boxed{2}", "label": True},
    {"id": "b", "gold": "2", "pred": r"\boxed{3}", "label": False},
    {"id": "c", "gold": r"\frac{1}{2}", "pred": "0.5", "label": True},
    {"id": "d", "gold": "4", "pred": r"4\sqrt{2}", "expect": "fail"},
    {"id": "e", "gold": r"\frac{1}{2}", "pred": r"\frac{2}{4}", "label": False, "mode": "simplest_form"},
    {"id": "f", "gold": "1", "pred": "2", "label": True},  # a mislabeled line: a false negative
]


def test_rates_and_misses(tmp_path: Path) -> None:
    result = run_bench("math", _suite(tmp_path, LINES))
    out = result.to_json()
    assert out["n"] == 6 and out["errors"] == 0
    assert out["fp_rate"] == 0.0 and out["fn_rate"] == pytest.approx(1 / 3)
    assert out["misses"] == ["f"] and out["accuracy"] == pytest.approx(5 / 6)
    assert out["checks_per_s"] > 0


def test_parallel_jobs_keep_line_order(tmp_path: Path) -> None:
    serial = run_bench("math", _suite(tmp_path, LINES))
    parallel = run_bench("math", _suite(tmp_path, LINES), jobs=3)
    assert [o.id for o in parallel.outcomes] == [o.id for o in serial.outcomes]
    assert parallel.to_json()["misses"] == serial.to_json()["misses"] == ["f"]
    with pytest.raises(BenchError, match="jobs"):
        run_bench("math", _suite(tmp_path, LINES), jobs=0)


def test_errors_count_against_the_grader(tmp_path: Path) -> None:
    fam = load_family("math")
    boom = type(fam)("boom", lambda line: (_ for _ in ()).throw(RuntimeError("sandbox down")), ())
    for jobs in (1, 2):  # a Family object (not a name) is checked in threads when jobs > 1
        result = run_bench(boom, _suite(tmp_path, LINES), jobs=jobs)
        assert len(result.errors) == 6 and result.fn_rate == 1.0 and result.fp_rate == 0.0


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "x", "gold": "1", "pred": "1"}', "suite.jsonl:2: missing field 'label'"),
        ('{"id": "x", "gold": "1", "pred": "1", "label": "yes"}', "suite.jsonl:2: field 'label'"),
        ('{"id": "x", "gold": "1", "label": true}', "suite.jsonl:2: missing field 'pred'"),
        ('{"gold": "1", "pred": "1", "label": true}', "suite.jsonl:2: missing field 'id'"),
        ("{not json", "suite.jsonl:2: not valid JSON"),
        ('{"id": "x", "gold": "1", "pred": "1", "expect": "maybe"}', "field 'expect'"),
    ],
)
def test_malformed_lines_name_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "suite.jsonl"
    path.write_text('{"id": "ok", "gold": "1", "pred": "1", "label": true}\n' + line + "\n")
    with pytest.raises(BenchError, match=message.replace("(", r"\(")):
        run_bench("math", path)
    res = runner.invoke(app, ["verifier-bench", "--grader", "math", "--suite", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_unknown_family_and_family_without_hook(tmp_path: Path) -> None:
    path = _suite(tmp_path, LINES)
    with pytest.raises(BenchError, match="unknown grader family 'nope'"):
        load_family("nope")
    with pytest.raises(BenchError, match="has no bench_verdict"):
        load_family("verigym.types")
    res = runner.invoke(app, ["verifier-bench", "--grader", "nope", "--suite", str(path)])
    assert res.exit_code == 2 and "unknown grader family" in res.output


def test_cli_json_and_table(tmp_path: Path) -> None:
    path = _suite(tmp_path, LINES)
    res = runner.invoke(app, ["verifier-bench", "--grader", "math", "--suite", str(path), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert {"n", "fp_rate", "fn_rate", "accuracy", "errors", "checks_per_s", "misses"} <= set(out)
    assert out["misses"] == ["f"]
    res = runner.invoke(app, ["verifier-bench", "-g", "math", "-s", str(path), "--mode", "simplest_form"])
    assert res.exit_code == 0 and "FP rate" in res.output and "f  false negative" in res.output
    res = runner.invoke(app, ["verifier-bench", "-g", "math", "-s", str(path), "--mode", "loose"])
    assert res.exit_code == 2 and "unknown math mode" in res.output
