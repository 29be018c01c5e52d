"""The built-in ``rubric_writing`` environment: open-ended writing graded by a rubric judge.

**Task.** Write a short piece (a product announcement, an event invitation, an apology e-mail,
a job posting) about a fictional subject with a few required details and a word to avoid,
within a word limit. Each task carries a HealthBench-style rubric in ``Task.info["rubric"]``:
criteria with points, e.g. *The response names the product "Zentra Lamp".* (2 points) and a
negative one, *The response uses the word "revolutionary".* (-2 points).

**Harness.** Single turn.

**Graders.** ``judge`` (weight 0.9): ``verigym.graders.judge.judge_grader`` asks the *judge
policy* about each criterion; the score is Σ met points / Σ positive points, clipped to [0, 1].
``length`` (weight 0.1): 1 when the reply has at least 10 words and at most the limit.

**The judge.** ``judge=`` takes any ``Policy``; from the command line pass
``--env-arg judge_base_url=http://host:8000/v1 --env-arg judge_model=NAME`` (and optionally
``judge_api_key_env=VAR``) to use an OpenAI-compatible server. With neither, the judge is an
offline, deterministic **stand-in**: ``verigym.graders.judge.quoted_phrase_verdict``, which marks
a criterion met when every double-quoted phrase in it occurs in the response. It exists so the
oracle/null checks and tests run offline; it checks wording, not quality, so use a real judge
model to measure writing.

**Difficulty.** ``level`` 1-3: how many required details (2, 3, 4), a tighter word limit at
higher levels.

**Oracle / null.** The oracle writes a reply that states every required detail and avoids the
banned word; the null policy replies nothing.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from verigym.envs._args import int_arg
from verigym.envs.base import SingleTurnEnv
from verigym.envs.procedural import ProceduralEnv
from verigym.envs.registry import EnvArgError
from verigym.graders.format import strip_think
from verigym.graders.judge import judge_grader, quoted_phrase_verdict
from verigym.policies.base import Policy
from verigym.policies.scripted import ScriptedPolicy
from verigym.policies.spec import MissingApiKey, ModelSpec, make_policy
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Message, Task, Trajectory

__all__ = ["RubricWritingEnv", "offline_judge"]

_NAMES = ("Zentra", "Quolla", "Bravik", "Solmere", "Tivana", "Orrin", "Kelpa", "Mirova", "Dunsel", "Aveto")
_THINGS = ("Lamp", "Kettle", "Backpack", "Notebook", "Speaker", "Bicycle", "Planter", "Watch")
_FEATURES = (
    "solar charging", "a ten-year warranty", "recycled aluminium", "voice control",
    "a foldable frame", "water resistance", "a week of battery life", "free repairs",
)  # fmt: skip
_MONTHS = ("March", "April", "May", "June", "July", "September", "October", "November")
_PLACES = ("Harbor Hall", "the Glass Pavilion", "Willow Park", "the Old Mill", "Cedar Library")
_BANNED = ("revolutionary", "amazing", "unprecedented", "literally", "synergy", "disruptive")
_KINDS = ("announcement", "invitation", "apology", "posting")


def offline_judge() -> Policy:
    """The offline stand-in judge: a criterion is met when all its quoted phrases occur in the reply."""
    return ScriptedPolicy(quoted_phrase_verdict, name="quoted-phrase-judge (offline stand-in)")


def length_ok(task: Task, trajectory: Trajectory) -> Grade:
    """1 when the reply has at least 10 words and no more than the task's word limit."""
    words = len(strip_think(trajectory.final_text).split())
    limit = int(task.info["word_limit"])
    return Grade(score=float(10 <= words <= limit), detail=f"{words} words (limit {limit})")


class RubricWritingEnv(ProceduralEnv, SingleTurnEnv):
    """Open-ended writing graded by a rubric judge (any Policy as the judge)."""

    name = "rubric_writing"
    description = "Open-ended writing graded by a rubric judge (any Policy as the judge)."
    public_info_keys = ("word_limit", "kind")

    def __init__(
        self,
        level: int = 1,
        judge: Policy | None = None,
        judge_base_url: str | None = None,
        judge_model: str | None = None,
        judge_api_key_env: str | None = None,
        size: int = 1000,
        system_prompt: str | None = None,
    ) -> None:
        self.level = int_arg("rubric_writing", "level", level, 1, 3)
        self.size = int_arg("rubric_writing", "size", size, 1, 10**9)
        self._owns_judge = False
        if judge is not None and judge_base_url is not None:
            raise EnvArgError("rubric_writing: give judge= or judge_base_url=, not both")
        if judge is None and judge_base_url is not None:
            spec = ModelSpec(model=judge_model, base_url=[judge_base_url], api_key_env=judge_api_key_env)
            try:
                judge = make_policy(spec)
            except MissingApiKey as exc:
                raise EnvArgError(
                    f"rubric_writing: {exc.worded('judge_api_key_env')}"
                    if exc.implicit
                    else f"rubric_writing: judge_api_key_env: the variable {exc.variable} is not set"
                ) from None
            self._owns_judge = True
        self.judge: Policy = judge if judge is not None else offline_judge()
        self.judge_is_stand_in = judge is None
        rubric = Rubric(
            [
                judge_grader(self.judge, weight=0.9, name="judge"),
                Grader(length_ok, weight=0.1, name="length"),
            ]
        )
        super().__init__(rubric=rubric, system_prompt=system_prompt)

    async def aclose(self) -> None:
        """Close the judge's HTTP session when this environment made the judge (``judge_base_url``)."""
        close = getattr(self.judge, "aclose", None)
        if self._owns_judge and close is not None:
            await close()

    def generate(self, rng: random.Random) -> Task:
        kind = rng.choice(_KINDS)
        subject = f"{rng.choice(_NAMES)} {rng.choice(_THINGS)}"
        price = f"${rng.randint(12, 499)}"
        date = f"{rng.choice(_MONTHS)} {rng.randint(1, 28)}"
        details: list[tuple[str, str]] = [
            ("names the product", subject),
            ("states the price", price),
            ("mentions the date", date),
            ("mentions the feature", rng.choice(_FEATURES)),
            ("mentions the place", rng.choice(_PLACES)),
        ]
        required = [details[0], *rng.sample(details[1:], self.level)]
        banned = rng.choice(_BANNED)
        limit = (150, 110, 90)[self.level - 1]
        ask = {
            "announcement": f"Write a short launch announcement for the {subject}.",
            "invitation": f"Write a short invitation to the launch event of the {subject}.",
            "apology": f"Write a short apology e-mail to customers about a delay of the {subject}.",
            "posting": f"Write a short job posting for a sales lead for the {subject}.",
        }[kind]
        wants = "; ".join(f"{what.split(' ', 1)[1]}: {value}" for what, value in required[1:])
        text = (
            f"{ask} Include these details: {wants}. Do not use the word '{banned}'. "
            f"Use at most {limit} words."
        )
        criteria: list[dict[str, Any]] = [
            {"criterion": f'The response {what} "{value}".', "points": 2 if i == 0 else 1}
            for i, (what, value) in enumerate(required)
        ]
        criteria.append({"criterion": f'The response uses the word "{banned}".', "points": -2})
        info = {"rubric": criteria, "word_limit": limit, "kind": kind}
        return Task(id="", prompt=(Message(role="user", content=text),), info=info)

    @property
    def task_name(self) -> str:
        return f"rubric_writing-l{self.level}"

    def oracle_policy(self) -> Policy:
        """Writes one sentence per required detail, quoting none of the banned words."""

        def solve(task: Task, messages: Sequence[Message]) -> str:
            lines = ["Dear friends, we have news to share with you today."]
            for c in task.info["rubric"]:
                if c["points"] > 0:
                    phrase = c["criterion"].split('"')[1]
                    lines.append(f"Please note {phrase} as part of this message.")
            lines.append("Thank you for reading, and we hope to see you soon.")
            return " ".join(lines)

        return self.task_oracle(solve, name="rubric_writing-oracle")

    def null_policy(self) -> Policy:
        return ScriptedPolicy(lambda messages: "", name="rubric_writing-null")
