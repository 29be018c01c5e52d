"""The wordle environment: feedback with repeated letters, invalid guesses, rewards, levels."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from verigym.envs.builtin.wordle import WordleEnv, feedback, load_words, parse_guess
from verigym.envs.check import check_env
from verigym.envs.registry import EnvArgError, load_env
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Message, Sampling


@pytest.mark.parametrize(
    ("guess", "secret", "marks"),
    [
        ("crane", "crane", "GGGGG"),
        ("speed", "abide", "XXYXY"),  # one E in the secret: only the first unmatched E is yellow
        ("eerie", "their", "YXYGX"),
        ("llama", "hello", "YYXXX"),
        ("sheep", "sweet", "GXGGX"),  # both Es green, nothing left for a yellow
        ("geese", "eagle", "YYXXG"),
    ],
)
def test_feedback_repeated_letters(guess: str, secret: str, marks: str) -> None:
    assert feedback(guess, secret) == marks


def test_parse_guess() -> None:
    assert parse_guess("<think>hmm</think>I try <guess>Crane</guess>") == "crane"
    assert parse_guess("slate.") == "slate"
    assert parse_guess("I give up") is None


def test_word_list_is_shipped_and_clean() -> None:
    words = load_words()
    assert len(words) >= 500 and all(len(w) == 5 and w.isalpha() and w.islower() for w in words)


def test_check_env_passes() -> None:
    report = check_env(load_env("wordle"), n=6)
    assert report.ok, report.failures


async def test_invalid_guesses_use_turns_and_solving_scores() -> None:
    env = WordleEnv(level=2)
    task = env.tasks(1, seed=3)[0]
    secret = task.info["secret"]
    other = next(w for w in load_words() if w != secret)
    script = iter(["no idea", "<guess>zzzzz</guess>", "<guess>abc</guess>", f"<guess>{other}</guess>"])

    def play(messages: Sequence[Message]) -> str:
        return next(script, f"<guess>{secret}</guess>")

    traj = await env.rollout(task, ScriptedPolicy(play), Sampling())
    env_msgs = [t.messages[0].content for t in traj.turns if t.source == "env"]
    assert env_msgs[0].startswith("Invalid guess: no guess found")
    assert "not in the word list" in env_msgs[1] and "not five letters" in env_msgs[2]
    assert traj.state["invalid"] == 3 and traj.state["solved"] and traj.stop_reason == "done"
    score = await env.rubric.score(task, traj)
    assert score.grades["solved"].score == 1.0
    assert score.grades["fewer_turns"].score == pytest.approx(1 / 5)
    assert score.reward == pytest.approx(1 + 0.2 / 5)


async def test_running_out_of_guesses_and_hard_mode() -> None:
    env = WordleEnv(level=1, max_guesses=2, hard_mode=True)
    task = env.tasks(1, seed=1)[0]
    secret = task.info["secret"]
    first = next(w for w in load_words() if feedback(w, secret).count("G") >= 1 and w != secret)
    pos = feedback(first, secret).index("G")
    breaker = next(w for w in load_words() if w[pos] != first[pos])
    script = iter([f"<guess>{first}</guess>", f"<guess>{breaker}</guess>"])
    traj = await env.rollout(task, ScriptedPolicy(lambda m: next(script)), Sampling())
    assert not traj.state["solved"] and len(traj.state["guesses"]) == 2
    last = traj.turns[-1].messages[0].content
    assert "hard mode" in last and "game is over" in last
    score = await env.rubric.score(task, traj)
    assert score.reward == pytest.approx(0.1 * feedback(first, secret).count("G") / 5)


def test_levels_and_bad_arguments() -> None:
    hard = WordleEnv(level=4)
    assert hard.max_guesses == 5 and hard.hard_mode
    for task in hard.tasks(20):
        s = task.info["secret"]
        assert len(set(s)) < 5 or set(s) & set("jkqvxz")
    test = {t.info["secret"] for t in WordleEnv().tasks(60)}
    train = {t.info["secret"] for t in WordleEnv().tasks(200, split="train")}
    assert not test & train
    with pytest.raises(EnvArgError, match="level"):
        WordleEnv(level=9)
    with pytest.raises(EnvArgError, match="hard_mode"):
        WordleEnv(hard_mode="yes")  # type: ignore[arg-type]
