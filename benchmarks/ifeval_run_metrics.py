"""IFEval's metrics of one ``verigym eval ifeval`` run under both checkers, from its ``results.jsonl``.

Every reply in the run is checked again against its prompt's instructions (the official
``input_data.jsonl`` the environment reads) by verigym's corrected checkers and by the ``official``
mode (lm-eval's IFEval checker, bugs included), strict and loose. Prints, per checker, IFEval's four
metrics (prompt-level and instruction-level accuracy, strict and loose) and the mean of prompt- and
instruction-level accuracy, which is how model cards such as SmolLM2's report IFEval ("Average
prompt/inst"); then the run's length statistics (mean completion tokens, replies cut at
``max_tokens``) and errored samples, which are listed apart and never counted as failures.

    python benchmarks/ifeval_run_metrics.py RUN_DIR [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from verigym.envs.builtin.ifeval import ifeval_default_path, ifeval_metrics, load_ifeval
from verigym.graders.instructions import check_instructions


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("run", type=Path, help="a `verigym eval ifeval --out` folder")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    path = ifeval_default_path()
    if path is None:
        raise SystemExit("IFEval's input_data.jsonl is not installed: run `make setup`")
    tasks = {t.id: t for t in load_ifeval(path)}
    rows = [
        json.loads(line) for line in (args.run / "results.jsonl").read_text().splitlines() if line.strip()
    ]
    config = json.loads((args.run / "config.json").read_text())["config"]
    latest = {(r["task_id"], r["sample_index"]): r for r in rows}  # a resumed run's redo replaces its error
    rows = list(latest.values())
    done = [r for r in rows if r.get("error") is None]
    errored = [r["task_id"] for r in rows if r.get("error") is not None]
    out: dict[str, Any] = {"replies": len(done), "errored": errored, "max_tokens": config["max_tokens"]}
    graded = [tasks[r["task_id"]] for r in done]
    for checker in ("corrected", "official"):
        scores: dict[str, list[tuple[int, float]]] = {"strict_followed": [], "loose_followed": []}
        for pos, (r, task) in enumerate(zip(done, graded, strict=True)):
            todo = list(zip(task.info["instruction_id_list"], task.info["kwargs"], strict=True))
            reply = r["trajectory"]["turns"][-1]["completion"]["text"]
            for mode in ("strict", "loose"):
                followed = [v.followed for v in check_instructions(reply, todo, mode=mode, checker=checker)]
                scores[f"{mode}_followed"].append((pos, sum(followed) / len(followed)))
        m = ifeval_metrics(graded, scores, checker)  # IFEval's four metrics, as summary.json has them
        for mode in ("strict", "loose"):
            prompt, inst = m[f"prompt_level_{mode}_acc"], m[f"inst_level_{mode}_acc"]
            out[f"{checker}_{mode}"] = {"prompt": prompt, "inst": inst, "average": (prompt + inst) / 2}
    tokens = [r["trajectory"]["turns"][-1]["completion"]["usage"]["completion_tokens"] for r in done]
    out["mean_completion_tokens"] = statistics.mean(tokens)
    out["cut_at_max_tokens"] = sum(t >= config["max_tokens"] for t in tokens)
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{args.run}: {len(done)} replies ({len(errored)} errored), max_tokens {config['max_tokens']}")
    print(f"{'checker':>10} {'mode':>6} {'prompt-level':>13} {'inst-level':>11} {'average prompt/inst':>20}")
    for checker in ("corrected", "official"):
        for mode in ("strict", "loose"):
            m = out[f"{checker}_{mode}"]
            print(f"{checker:>10} {mode:>6} {m['prompt']:>13.3f} {m['inst']:>11.3f} {m['average']:>20.3f}")
    print(
        f"mean completion tokens {out['mean_completion_tokens']:.0f}; "
        f"cut at max_tokens: {out['cut_at_max_tokens']}/{len(done)}"
    )


if __name__ == "__main__":
    main()
