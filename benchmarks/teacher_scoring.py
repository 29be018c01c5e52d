"""How long an in-process distillation teacher takes to score one RL step's samples (issue 26).

The rows are a ``calc`` step's on SmolLM2-135M-Instruct: ``--groups`` groups of ``--group-size``
samples, each a 248-token prompt (the tool schema in the system prompt) shared by its group and a
~70-token two-turn completion. Two ways of scoring them, alternated round by round:

- ``full``: one padded forward of every row and ``log_softmax`` over every position (prompt
  included), the teacher's scoring before this script;
- ``shared``: ``InProcessTeacher.logprobs`` now, the student update's shared-prefix forward
  (a group's prompt once, the vocabulary projection on the completions only).

Prints seconds per step for each, the ratio, the largest difference on the model tokens, and MET / NOT
MET against the target that scoring costs at most half of what it did.

    python benchmarks/teacher_scoring.py --rounds 3 --threads 2
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from verigym.policies.catalogue import pull, resolve
from verigym.train.distill import InProcessTeacher
from verigym.train.samples import Row, collate


def rows_like_calc(vocab: int, groups: int, group_size: int, seed: int) -> list[Row]:
    rng = random.Random(seed)
    rows = []
    for _ in range(groups):
        prompt = [rng.randrange(100, vocab) for _ in range(248)]
        for _ in range(group_size):
            call = [rng.randrange(100, vocab) for _ in range(rng.randint(25, 40))]
            result = [rng.randrange(100, vocab) for _ in range(12)]
            answer = [rng.randrange(100, vocab) for _ in range(rng.randint(4, 8))]
            ids = prompt + call + result + answer
            mask = [0] * len(prompt) + [1] * len(call) + [0] * len(result) + [1] * len(answer)
            rows.append(Row(ids, mask, [0.0] * len(ids)))
    return rows


@torch.no_grad()
def full_scoring(teacher: InProcessTeacher, rows: list[Row], temperature: float) -> list[list[float]]:
    logp = torch.log_softmax(teacher.logits(rows) / temperature, dim=-1)
    got = logp.gather(-1, collate(rows, teacher.pad_id).targets.unsqueeze(-1)).squeeze(-1)
    return [[0.0, *got[i, : len(r.ids) - 1].tolist()] for i, r in enumerate(rows)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="rounds; each times both ways, alternating first")
    ap.add_argument("--groups", type=int, default=4, help="groups a step (the calc recipe's 4)")
    ap.add_argument("--group-size", type=int, default=8, help="samples a group (the calc recipe's 8)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random token rows")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    pull("smollm2-135m-instruct")
    path = resolve("smollm2-135m-instruct")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    teacher = InProcessTeacher(model, tok, "smollm2", pad_id=tok.pad_token_id or 0, micro_rows=64)
    rows = rows_like_calc(len(tok), args.groups, args.group_size, args.seed)
    ways = {"full": lambda: full_scoring(teacher, rows, 1.0), "shared": lambda: teacher.logprobs(rows, 1.0)}
    times: dict[str, list[float]] = {k: [] for k in ways}
    out: dict[str, list[list[float]]] = {}
    for rnd in range(args.rounds):
        for name in list(ways)[:: 1 if rnd % 2 == 0 else -1]:
            t0 = time.perf_counter()
            out[name] = ways[name]()
            times[name].append(time.perf_counter() - t0)
    diff = max(
        abs(a - b)
        for r, f, s in zip(rows, out["full"], out["shared"], strict=True)
        for a, b, m in zip(f, s, r.mask, strict=True)
        if m
    )
    full, shared = statistics.median(times["full"]), statistics.median(times["shared"])
    print(f"rows: {len(rows)} ({args.groups} groups x {args.group_size}), {len(rows[0].ids)}-token rows")
    for name in ways:
        print(
            f"{name:7s} s/step: "
            + ", ".join(f"{t:.2f}" for t in times[name])
            + f" (median {statistics.median(times[name]):.2f})"
        )
    print(f"speed-up full/shared: {full / shared:.2f}x; largest |difference| on model tokens: {diff:.2e}")
    print(f"scoring at most half its old cost: {'MET' if shared <= full / 2 else 'NOT MET'}")


if __name__ == "__main__":
    main()
