"""The built-in ``wordle`` environment: guess a secret five-letter word in a few turns.

**Task.** Each task is one game; the secret comes from the shipped word list
(``envs/builtin/data/wordle_words.txt``, 530 common English words, also the allowed guesses). The user
message names the game and the number of guesses; the secret is in ``Task.info["secret"]``.
Train and test games use disjoint secrets.

**Harness.** Multi-turn (``MultiTurnEnv``). Each model turn is one guess, written
``<guess>crane</guess>`` (a reply that is just one five-letter word also counts). The
environment answers with the feedback pattern, one letter per position: ``G`` right letter in
the right place, ``Y`` in the word elsewhere, ``X`` not in the word (any more) — repeated letters
are scored like the real game: greens first, then yellows left to right while the secret still
has unmatched copies of that letter. An invalid guess (no guess, not five letters, not in the
word list, or in hard mode one that ignores a revealed hint) is told to the model and uses up
a guess. The game ends when the word is found or the guesses run out.

**Graders** (as in the ``verifiers`` Wordle example): ``solved`` (1 if the secret was guessed,
weight 1), ``fewer_turns`` (1/guesses used when solved, weight 0.2) and ``partial`` (greens of
the best valid guess / 5 when not solved, weight 0.1). A first-guess win scores 1.2.

**Difficulty** (``level``; ``max_guesses`` and ``hard_mode`` override it):

=====  ===========  =========  ========================================================
level  max guesses  hard mode  secrets
=====  ===========  =========  ========================================================
1      8            no         any word
2      6            no         any word
3      6            yes        any word
4      5            yes        words with a repeated or rare letter (j, k, q, v, x, z)
=====  ===========  =========  ========================================================
"""

from __future__ import annotations

import functools
import random
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigym.envs._args import int_arg
from verigym.envs.base import MultiTurnEnv
from verigym.envs.procedural import ProceduralEnv
from verigym.envs.registry import EnvArgError
from verigym.graders.format import strip_think
from verigym.policies.base import Policy
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Message, Task, Trajectory

__all__ = ["LEVELS", "WordleEnv", "feedback", "load_words", "parse_guess"]

LEVELS: dict[int, tuple[int, bool, bool]] = {1: (8, False, False), 2: (6, False, False), 3: (6, True, False)}
LEVELS[4] = (5, True, True)
WORDS_FILE = Path(__file__).parent / "data" / "wordle_words.txt"

SYSTEM_PROMPT = (
    "You are playing Wordle. Guess the secret five-letter English word. Write each guess as "
    "<guess>word</guess>. After each guess you get one letter per position: G = right letter, "
    "right place; Y = in the word but elsewhere; X = not in the word. Think briefly, then guess."
)
_GUESS_TAG = re.compile(r"<guess>\s*([A-Za-z]+)\s*</guess>", re.IGNORECASE)
_RARE = set("jkqvxz")


@functools.cache
def load_words(path: str | None = None) -> tuple[str, ...]:
    """The word list (lowercase five-letter words, ``#`` comments skipped), in file order."""
    text = Path(path or WORDS_FILE).read_text(encoding="utf-8")
    words = [w.strip().lower() for w in text.splitlines() if w.strip() and not w.startswith("#")]
    return tuple(dict.fromkeys(w for w in words if len(w) == 5 and w.isalpha()))


def feedback(guess: str, secret: str) -> str:
    """The G/Y/X pattern of ``guess`` against ``secret`` (repeated letters as in the real game)."""
    guess, secret = guess.lower(), secret.lower()
    marks = ["X"] * len(guess)
    left = Counter(s for g, s in zip(guess, secret, strict=True) if g != s)
    for i, (g, s) in enumerate(zip(guess, secret, strict=True)):
        if g == s:
            marks[i] = "G"
        elif left[g] > 0:
            marks[i] = "Y"
            left[g] -= 1
    return "".join(marks)


def parse_guess(text: str) -> str | None:
    """The guess in a reply: the last ``<guess>...</guess>``, or a reply that is one word."""
    text = strip_think(text)
    found = _GUESS_TAG.findall(text)
    if found:
        return str(found[-1]).lower()
    bare = text.strip().strip(".!\"'`*").strip()
    return bare.lower() if re.fullmatch(r"[A-Za-z]+", bare) else None


def _hard_mode_violation(guess: str, history: Sequence[tuple[str, str]]) -> str | None:
    for prev, marks in history:
        for i, (letter, mark) in enumerate(zip(prev, marks, strict=True)):
            if mark == "G" and guess[i] != letter:
                return f"hard mode: position {i + 1} must be {letter.upper()!r}"
        needed = Counter(letter for letter, mark in zip(prev, marks, strict=True) if mark in "GY")
        have = Counter(guess)
        for letter, count in needed.items():
            if have[letter] < count:
                return f"hard mode: the guess must contain {letter.upper()!r}"
    return None


def _solved(task: Task, trajectory: Trajectory) -> Grade:
    state = trajectory.state
    used = len(state.get("guesses", []))
    if state.get("solved"):
        return Grade(score=1.0, detail=f"solved in {used} guesses")
    return Grade(score=0.0, detail=f"not solved after {used} guesses ({state.get('invalid', 0)} invalid)")


def _fewer_turns(task: Task, trajectory: Trajectory) -> float:
    used = len(trajectory.state.get("guesses", []))
    return 1.0 / used if trajectory.state.get("solved") and used else 0.0


def _partial(task: Task, trajectory: Trajectory) -> float:
    if trajectory.state.get("solved"):
        return 0.0  # ``solved`` already pays for it
    marks = trajectory.state.get("feedback", [])
    return max((m.count("G") / 5 for m in marks if m), default=0.0)


class WordleEnv(ProceduralEnv, MultiTurnEnv):
    """Multi-turn Wordle with G/Y/X feedback; reward for solving and for fewer guesses."""

    name = "wordle"
    description = "Multi-turn Wordle with per-guess feedback; reward for solving and for fewer turns."

    def __init__(
        self,
        level: int = 2,
        max_guesses: int | None = None,
        hard_mode: bool | None = None,
        size: int = 1000,
        system_prompt: str | None = SYSTEM_PROMPT,
    ) -> None:
        self.level = int_arg("wordle", "level", level, 1, max(LEVELS))
        base_guesses, base_hard, self.hard_secrets = LEVELS[self.level]
        self.max_guesses = int_arg(
            "wordle", "max_guesses", base_guesses if max_guesses is None else max_guesses, 1, 20
        )
        chosen_hard = base_hard if hard_mode is None else hard_mode
        if not isinstance(chosen_hard, bool):
            raise EnvArgError(f"wordle: hard_mode must be true or false, got {hard_mode!r}")
        self.hard_mode = chosen_hard
        self.size = int_arg("wordle", "size", size, 1, 10**9)
        rubric = Rubric(
            [
                Grader(_solved, name="solved"),
                Grader(_fewer_turns, weight=0.2, name="fewer_turns"),
                Grader(_partial, weight=0.1, name="partial"),
            ]
        )
        super().__init__(rubric=rubric, system_prompt=system_prompt, max_turns=self.max_guesses)
        self._secret_words: list[str] | None = None

    def _secrets(self) -> list[str]:
        words = list(load_words())
        if self.hard_secrets:
            words = [w for w in words if len(set(w)) < 5 or set(w) & _RARE]
        return words

    @property
    def task_name(self) -> str:
        return f"wordle-l{self.level}g{self.max_guesses}{'h' if self.hard_mode else ''}"

    def generate(self, rng: random.Random) -> Task:
        """One game; test and train games never share a secret (``split_key``)."""
        if self._secret_words is None:
            self._secret_words = self._secrets()
        secret = rng.choice(self._secret_words)
        rules = "Hard mode: every guess must use all the hints revealed so far. " if self.hard_mode else ""
        text = (
            f"Wordle game {rng.getrandbits(32):08x}. Guess the secret five-letter word in at most "
            f"{self.max_guesses} guesses. {rules}Write your first guess as <guess>word</guess>."
        )
        return Task(id="", prompt=(Message(role="user", content=text),), info={"secret": secret})

    def split_key(self, task: Task) -> str:
        return str(task.info["secret"])

    def setup_state(self, task: Task) -> dict[str, Any]:
        return {"secret": task.info["secret"], "guesses": [], "feedback": [], "invalid": 0, "solved": False}

    async def respond(self, trajectory: Trajectory, state: dict[str, Any]) -> list[Message]:
        guess = parse_guess(trajectory.final_text)
        history = [(g, f) for g, f in zip(state["guesses"], state["feedback"], strict=True) if f]
        problem = None
        if guess is None:
            problem = "no guess found; write it as <guess>word</guess>"
        elif len(guess) != 5:
            problem = f"{guess!r} is not five letters"
        elif guess not in load_words():
            problem = f"{guess!r} is not in the word list"
        elif self.hard_mode:
            problem = _hard_mode_violation(guess, history)
        state["guesses"].append(guess or "")
        left = self.max_guesses - len(state["guesses"])
        if problem is not None:
            state["invalid"] += 1
            state["feedback"].append("")
            text = f"Invalid guess: {problem}. This used a guess; {left} left."
        else:
            assert guess is not None
            marks = feedback(guess, state["secret"])
            state["feedback"].append(marks)
            if marks == "GGGGG":
                state["solved"] = True
                text = f"{guess.upper()} {marks} - solved in {len(state['guesses'])} guesses!"
            else:
                text = f"{guess.upper()} {marks}. {left} guesses left."
        if not state["solved"] and left <= 0:
            text += " No guesses left; the game is over."
        return [Message(role="user", content=text)]

    async def done(self, trajectory: Trajectory, state: dict[str, Any]) -> bool:
        return bool(state.get("solved")) or len(state.get("guesses", [])) >= self.max_guesses

    def oracle_policy(self) -> Policy:
        """Guesses the secret (from ``Task.info``) on the first turn."""
        return self.task_oracle(lambda task, _: f"<guess>{task.info['secret']}</guess>", name="wordle-oracle")

    def null_policy(self) -> Policy:
        """Never makes a guess."""
        return ScriptedPolicy(lambda messages: "I give up.", name="wordle-null")
