"""Every public import path of the graders, and every name each one documents in ``__all__``, imports.

The families are packages (``graders/math/``, ``graders/code/``, ...) that re-export their private
modules; the bubblewrap sandbox and SWE grading are the code family's ``code.sandbox`` and
``code.swe`` (their old paths ``verigym.graders.sandbox``/``swe``: ``tests/core/test_deprecated.py``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from verigym.envs.registry import load_grader_family
from verigym.graders import bench
from verigym.graders.bench import load_family
from verigym.graders.families import find_family, grader_families

DOCUMENTED: dict[str, list[str]] = {
    "verigym.graders.math": [
        "BENCH", "DEFAULT_TIMEOUT", "MODES", "SUITE_FIELDS", "MathVerdict", "bench_verdict", "bench_warmup",
        "check_equivalent", "clear_caches", "extract_answer", "math_grader", "parse_mode",
    ],
    "verigym.graders.code.patch": ["PatchError", "apply_patch", "changed_paths"],
    "verigym.graders": [
        "code_grader", "fields_grader", "final_state_grader", "format_grader", "hacking_penalty",
        "instructions_grader", "judge_grader", "math_grader", "max_length_grader", "overlong_grader",
        "required_outputs_grader", "schema_grader", "swe_grader", "token_cost_grader", "toolcall_grader",
    ],
    "verigym.graders.code": [
        "BENCH", "CaseResult", "CodeResult", "TaskTestsError", "bench_verdict", "bench_warmup", "check_suite_line",
        "code_grader", "compare_output", "entry_points", "extract_code", "run_function_tests", "run_io_tests",
    ],
    "verigym.graders.code.sandbox": [
        "Limits", "Sandbox", "SandboxResult", "SandboxUnavailable", "kill_group", "python_executable",
        "random_uid", "run_sandboxed", "site_packages",
    ],
    "verigym.graders.code.swe": [
        "BENCH", "PROTECTED_PATTERNS", "TEST_PATTERNS", "PatchError", "SweResult", "apply_patch", "bench_verdict",
        "framework_refs", "grade_repo", "is_protected", "is_test_path", "swe_grader",
    ],
    "verigym.graders.instructions": [
        "BENCH", "CHECKER_KINDS", "INSTRUCTIONS", "OFFICIAL_CHECKERS", "SUPPORTED_LANGUAGES", "Checker",
        "CheckerKind", "InstructionResult", "bench_verdict", "check_instruction", "check_instructions",
        "check_official", "detect_language", "instructions_from_info", "instructions_grader", "instructions_rubric",
        "loose_variants", "official_loose_variants",
    ],
    "verigym.graders.judge": [
        "BENCH", "JUDGE_SYSTEM", "JUDGE_TEMPLATE", "Criterion", "JudgeAgreement", "JudgeCache", "JudgeError",
        "RubricNode", "Verdict", "bench_verdict", "evaluate_judge", "judge_agreement", "judge_criteria",
        "judge_grader", "judge_messages", "parse_rubric", "parse_verdict", "quoted_phrase_verdict",
        "score_node",
    ],
    "verigym.graders.schema": [
        "BENCH", "Format", "ParseError", "bench_verdict", "fields_grader", "fields_score", "parse_structured",
        "required_paths", "schema_grader", "schema_score",
    ],
    "verigym.graders.toolcall": [
        "BENCH", "STRING_MODES", "Call", "MatchResult", "bench_verdict", "bfcl_string", "calls_from_trajectory",
        "check_type", "contains_output",
        "final_state_grader", "match_any", "match_call", "match_calls", "replay_actions",
        "required_outputs_grader", "state_hash", "toolcall_grader",
    ],
    "verigym.graders.format": [
        "BENCH", "SUITE_FIELDS", "XMLParser", "bench_verdict", "extract_all_boxed", "extract_answer_line",
        "extract_boxed", "extract_xml", "format_errors", "format_grader", "strip_think",
    ],
    "verigym.graders.length": [
        "BENCH", "bench_verdict", "completion_lengths", "max_length_grader", "overlong_grader",
        "soft_overlong_penalties", "soft_overlong_penalty", "token_cost_grader", "token_cost_penalty",
    ],
    "verigym.graders.hacking": [
        "BENCH", "DETECTORS", "any_hacking", "bench_verdict", "cheat_judge", "copied_answer", "deleted_tests",
        "hacking_penalty", "hedged_answer", "network_attempts", "protected_edits",
    ],
    "verigym.graders.bench": [
        "FAMILIES", "BenchError", "BenchResult", "LineOutcome", "load_family", "load_suite", "run_bench",
    ],
}  # fmt: skip


@pytest.mark.parametrize("path", sorted(DOCUMENTED))
def test_documented_names_import(path: str) -> None:
    module = importlib.import_module(path)
    assert sorted(module.__all__) == sorted(DOCUMENTED[path])
    missing = [name for name in DOCUMENTED[path] if not hasattr(module, name)]
    assert not missing, f"{path} lacks {missing}"


def test_the_swe_family_is_found_in_the_code_package() -> None:
    """``swe`` is declared by ``code/swe.py`` (a family package's public module with a ``BENCH``): found
    by name without the old ``verigym.graders.swe`` path, which is never imported for it."""
    from verigym.graders.code import swe

    sys.modules.pop("verigym.graders.swe", None)
    family = find_family("swe")
    assert family.source == "verigym.graders.code.swe" and family.verdict is swe.bench_verdict
    assert "verigym.graders.swe" not in sys.modules
    assert find_family("verigym.graders.code.swe") == family and "swe" in grader_families()


@pytest.mark.parametrize("family", sorted(grader_families()))
def test_every_bench_family_loads(family: str) -> None:
    found = load_family(family)
    assert callable(found.verdict) and found.name == family
    assert find_family(found.source) == found  # how a bench child process finds it again


SUITES = Path(__file__).resolve().parents[1] / "suites"


def test_every_suite_belongs_to_one_declared_family() -> None:
    families = [*grader_families().values(), load_grader_family("repo_fix")]  # repo_fix: the env's own
    declared = [suite for family in families for suite in family.suites]
    assert sorted(declared) == sorted(p.name for p in SUITES.glob("*.jsonl"))
    assert sorted(bench.FAMILIES) == sorted(grader_families())  # the old table, kept until verigym 0.3
    assert (
        load_family("repo_fix").source == "verigym.envs.builtin.repo_fix"
    )  # registered by load_grader_family
