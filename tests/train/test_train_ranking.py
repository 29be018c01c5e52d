"""Relative ranking on the grader vector: rank scores and advantages against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from verigym.runner import Scored
from verigym.train.config import ConfigError, build_config
from verigym.train.ranking import lexicographic_scores, pareto_scores, priority_order, rank_scores
from verigym.train.rewards import Group, Sample, StepBatch, assign_advantages
from verigym.train.samples import trajectory_sequences
from verigym.types import Completion, Grade, Message, Score, Task, Trajectory, Turn

torch.set_num_threads(1)

# columns in priority order (correct, format); four samples of one group
GRADES = torch.tensor([[1, 1], [0, 1], [0, 0], [0, 0]], dtype=torch.float64)
ONE = torch.tensor([0, 0, 0, 0])


def test_lexicographic_mid_ranks_by_hand() -> None:
    # ranks from the bottom 1.5, 1.5 (tie), 3, 4 → (r − 1)/(n − 1) = 1/6, 1/6, 2/3, 1
    q = lexicographic_scores(GRADES, ONE)
    assert q.tolist() == pytest.approx([1.0, 2 / 3, 1 / 6, 1 / 6])
    # format outranking correct reorders: (format, correct) = (1,1) (1,0) (0,0) (0,0) → same vector order
    # but a sample with format only now beats one with correct only
    swap = torch.tensor([[0, 1], [1, 0]], dtype=torch.float64)  # (correct, format)
    assert lexicographic_scores(swap, torch.tensor([5, 5])).tolist() == [0.0, 1.0]
    assert lexicographic_scores(swap[:, [1, 0]], torch.tensor([5, 5])).tolist() == [1.0, 0.0]


def test_pareto_fronts_by_hand() -> None:
    # (1,1) dominates all; (0,1) dominates the two (0,0): fronts 0, 1, 2, 2 → 1 − f/2
    assert pareto_scores(GRADES, ONE).tolist() == [1.0, 0.5, 0.0, 0.0]
    # incomparable vectors share the first front, whatever the priority
    inc = torch.tensor([[1, 0], [0, 1], [0, 0]], dtype=torch.float64)
    assert pareto_scores(inc, torch.tensor([3, 3, 3])).tolist() == [1.0, 1.0, 0.0]
    assert pareto_scores(torch.ones(3, 2), torch.tensor([1, 1, 1])).tolist() == [1.0, 1.0, 1.0]


def test_groups_are_ranked_separately_and_a_group_of_one_gets_half() -> None:
    grades = torch.tensor([[1.0], [0.0], [0.3], [0.0], [0.9]], dtype=torch.float64)
    groups = torch.tensor([7, 7, 2, 2, 9])  # non-contiguous ids; group 9 has one sample
    q = lexicographic_scores(grades, groups)
    assert q.tolist() == [1.0, 0.0, 1.0, 0.0, 0.5]


def test_penalty_ranks_first_and_priority_order() -> None:
    penalty = torch.tensor([1.0, 0.0, 0.0, 0.0])  # the best-graded sample cheated
    q = rank_scores("lexicographic", GRADES, ONE, penalty=penalty)
    assert q.tolist() == pytest.approx([0.0, 1.0, 0.5, 0.5])  # below everyone; ties 2.5 → 0.5
    assert priority_order(["correct", "format", "length"], [0.5, 0.2, 0.2], []) == [0, 1, 2]
    assert priority_order(["correct", "format", "length"], [0.5, 0.2, 0.3], ["format"]) == [1, 0, 2]
    with pytest.raises(ValueError, match="unknown grader"):
        priority_order(["correct"], [1.0], ["nope"])


def _sample(correct: float, fmt: float) -> Sample:
    comp = Completion(
        text="x", prompt_token_ids=(1, 2), completion_token_ids=(10, 11), logprobs=(-0.1, -0.1), token_ids_exact=True
    )  # fmt: skip
    traj = Trajectory(task_id="t", prompt=[Message(role="user", content="q")])
    traj.turns.append(Turn(source="model", messages=[comp.as_message()], completion=comp))
    grades = {"correct": Grade(score=correct), "format": Grade(score=fmt)}
    return Sample(
        Scored(traj, Score(grades=grades, reward=0.5 * correct + 0.5 * fmt)), trajectory_sequences(traj)
    )


def _batch() -> StepBatch:
    task = Task(id="t", prompt=(Message(role="user", content="q"),))
    samples = [_sample(1, 1), _sample(1, 0), _sample(0, 0), _sample(0, 0)]
    return StepBatch(0, [Group("e", task, samples, {"correct": 0.5, "format": 0.5})])


def test_advantages_from_ranks_by_hand() -> None:
    gen = torch.Generator()
    lex = build_config({"rl": {"ranking": "lexicographic", "ranking_priority": ["correct", "format"]}})
    rows, m = assign_advantages(_batch(), lex, generator=gen)
    # q = 1, 2/3, 1/6, 1/6; mean 1/2; centred .5, 1/6, −1/3, −1/3; Bessel std sqrt(.5/3) = 0.40825
    assert [r.advantage for r in rows] == pytest.approx(
        [1.2247449, 0.4082483, -0.8164966, -0.8164966], rel=1e-5
    )  # std + ε=1e-6
    assert m["reward"] == pytest.approx(0.5)  # the mean rank score
    dr = build_config({"rl": {"ranking": "pareto", "advantage": "dr_grpo"}})
    rows, _ = assign_advantages(_batch(), dr, generator=gen)
    # fronts 0, 1, 2, 2 → q = 1, .5, 0, 0; mean .375; Dr. GRPO: centred only
    assert [r.advantage for r in rows] == pytest.approx([0.625, 0.125, -0.375, -0.375])
    # the weighted sum (ranking off) on the same batch: rewards 1, .5, 0, 0
    rows, _ = assign_advantages(_batch(), build_config({"rl": {"advantage": "dr_grpo"}}), generator=gen)
    assert [r.advantage for r in rows] == pytest.approx([0.625, 0.125, -0.375, -0.375])
    # with no priority given, equal weights order the graders by name: correct, then format
    rows, _ = assign_advantages(_batch(), build_config({"rl": {"ranking": "lexicographic"}}), generator=gen)
    assert rows[1].advantage == pytest.approx(0.4082483, rel=1e-5)


def test_ranking_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"rl\.ranking"):
        build_config({"rl": {"ranking": "borda"}})
    with pytest.raises(ConfigError, match="ranking_priority needs"):
        build_config({"rl": {"ranking": "pareto", "ranking_priority": ["correct"]}})
