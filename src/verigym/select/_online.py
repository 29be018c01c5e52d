"""DeepConf online (Fu et al. 2025, "Deep Think with Confidence"): stop a trace during
generation as soon as the mean confidence of its last ``w`` tokens falls below a threshold
set by warm-up traces.

``OnlineDeepConf`` is an early-stop hook: the generation loop calls ``hook(row, top_logprobs)``
after every new token of a row (``top_logprobs``: that row's top-k logprobs so far) and stops
the row when it returns True (``LocalPolicy`` marks it ``finish_reason="early_stop"``). The
first check happens once a row has ``w`` tokens; the row is cut at the first ``t ≥ w`` with
``mean(C[t-w:t]) < threshold``. Stopped traces do not vote. "Below" means below by more than float
noise (a relative 1e-6, ``TOLERANCE``): the same trace computed in a different batch differs in the
last bits of its logprobs, and traces that share a prefix share its confidence exactly — a tie
with the threshold must not be decided by rounding.

Servers. A server can run the same rule inside its decoding loop if it (1) computes the top-k
logprobs of every step (it already does for ``top_logprobs``), (2) accepts per-request
``window`` and ``threshold`` arguments, and (3) ends the sequence with a distinct finish
reason. ``server_args()`` gives those arguments in the form DeepConf's patched vLLM reads
(``SamplingParams.extra_args``, sent as ``extra_body={"vllm_xargs": ...}`` through the
OpenAI API). An ordinary OpenAI endpoint has no such hook: there verigym samples the traces
in full and applies the same rule afterwards (``select_online`` on the finished traces) —
the answer is the same, but no tokens are saved, and results say ``mode="offline-fallback"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.select._common import Candidate, Selection
from verigym.select._confidence import (
    DEFAULT_FRACTION,
    DEFAULT_K,
    DEFAULT_WINDOW,
    choose_window,
    keep_top,
    token_confidences,
    trace_score,
)
from verigym.select.majority import weighted_vote

__all__ = ["OnlineDeepConf", "select_online", "vote_online"]


TOLERANCE = 1e-6


def _below(threshold: float) -> float:
    """The value a window mean must fall under to count as below ``threshold``."""
    return threshold - TOLERANCE * max(1.0, abs(threshold))


@dataclass
class _Row:
    prefix: list[float] = field(default_factory=lambda: [0.0])
    cut: int | None = None


class OnlineDeepConf:
    """The DeepConf-online early-stop hook; also usable during RL rollouts to drop hopeless samples.

    Either give ``threshold`` directly, or call ``calibrate(warmup_top_logprobs)`` after
    generating the warm-up traces: the window is scaled to their median length (when
    ``fraction > 0``) and the threshold becomes the keep-top-η cut of their lowest-group
    confidences (η = 0.1 keeps the 10% most confident: aggressive; η = 0.9: conservative).

    ``thresholds`` gives rows their own threshold (one batched pass over many tasks, each
    calibrated on its own warm-up: row → threshold); other rows use ``threshold``.
    ``stopped`` maps each row cut so far to the number of tokens it had when cut;
    ``reset()`` clears the per-row state between generation calls.
    """

    def __init__(
        self,
        threshold: float | None = None,
        *,
        window: int = DEFAULT_WINDOW,
        k: int = DEFAULT_K,
        eta: float = 0.1,
        fraction: float = DEFAULT_FRACTION,
        thresholds: Mapping[int, float] | None = None,
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be ≥ 1, got {window}")
        self.threshold = threshold
        self.max_window = window
        self.window = window
        self.k = k
        self.eta = eta
        self.fraction = fraction
        self.thresholds = dict(thresholds or {})
        self._rows: dict[int, _Row] = {}

    # -- calibration ---------------------------------------------------------------------------
    def calibrate(self, warmup: Sequence[Sequence[Sequence[float]]]) -> float | None:
        """Set window and threshold from warm-up traces' top-k logprobs; returns the threshold
        (None when no warm-up trace had any token: nothing will be stopped)."""
        confs = [token_confidences(t, self.k) for t in warmup if len(t)]
        if not confs:
            self.threshold = None
            return None
        if self.fraction > 0:
            self.window = choose_window([len(c) for c in confs], self.max_window, self.fraction)
        scores = [trace_score(c, self.window, "lowest") for c in confs]
        kept = [
            s for s, keep in zip(scores, keep_top(scores, self.eta), strict=True) if keep and s is not None
        ]
        self.threshold = min(kept)
        return self.threshold

    def calibrate_groups(
        self, warmups: Sequence[Sequence[Sequence[Sequence[float]]]], rows: Sequence[Sequence[int]]
    ) -> dict[int, float]:
        """Per-task thresholds for one batched pass over many tasks (an RL rollout step).

        ``warmups[g]`` are task g's warm-up traces (top-k logprobs) and ``rows[g]`` the row
        indices of its remaining traces in the coming ``generate`` call. One window (from all
        warm-ups' lengths) is shared; each task's rows get the threshold of its own warm-up.
        Tasks whose warm-up has no tokens get no threshold (never stopped).
        """
        if len(warmups) != len(rows):
            raise ValueError(f"{len(warmups)} warm-up groups but {len(rows)} row groups")
        lengths = [len(t) for group in warmups for t in group if len(t)]
        self.window = choose_window(lengths, self.max_window, self.fraction) if lengths else self.max_window
        scale, self.fraction = self.fraction, 0.0  # keep the shared window while calibrating each group
        try:
            for group, members in zip(warmups, rows, strict=True):
                threshold = self.calibrate(group)
                for r in members:
                    if threshold is None:
                        self.thresholds.pop(r, None)
                    else:
                        self.thresholds[r] = threshold
        finally:
            self.fraction = scale
        self.threshold = None
        return dict(self.thresholds)

    # -- the hook --------------------------------------------------------------------------------
    def reset(self) -> None:
        self._rows.clear()

    @property
    def stopped(self) -> dict[int, int]:
        return {r: s.cut for r, s in self._rows.items() if s.cut is not None}

    def __call__(self, row: int, top_logprobs: Sequence[Sequence[float]]) -> bool:
        """True when row ``row`` must stop now (and on every later call for it)."""
        state = self._rows.get(row)
        n = len(top_logprobs)
        if state is None or n < len(state.prefix) - 1:  # a new generation reuses the row index
            state = self._rows[row] = _Row()
        if state.cut is not None:
            return True
        prefix = state.prefix
        for t in range(len(prefix) - 1, n):
            top = list(top_logprobs[t][: self.k])
            prefix.append(prefix[-1] + (-math.fsum(top) / len(top) if top else 0.0))
        threshold = self.thresholds.get(row, self.threshold)
        if threshold is None or n < self.window:
            return False
        if (prefix[n] - prefix[n - self.window]) / self.window < _below(threshold):
            state.cut = n
            return True
        return False

    def replay(self, top_logprobs: Sequence[Sequence[float]], *, ended: bool = False) -> int | None:
        """Where this hook would cut a trace sampled in full (tokens kept), or None if it runs to the end.

        Exact for a trace sampled with the same seed: the decision at step t depends only on the
        first t tokens, so the cut trace is a prefix of the full one. ``ended``: the trace ended on
        its own (EOS or a stop string) — a generation loop checks that before the hook, so its
        last token is never a cut point.
        """
        conf = token_confidences(top_logprobs, self.k) if len(top_logprobs) else []
        last = len(conf) - 1 if ended else len(conf)
        if self.threshold is None or last < self.window:
            return None
        bar = _below(self.threshold)
        prefix = [0.0]
        for c in conf:
            prefix.append(prefix[-1] + c)
        for t in range(self.window, last + 1):
            if (prefix[t] - prefix[t - self.window]) / self.window < bar:
                return t
        return None

    def server_args(self) -> dict[str, Any]:
        """Per-request arguments for a server that runs the rule itself (DeepConf's vLLM patch)."""
        return {"enable_conf": True, "window_size": self.window, "threshold": self.threshold}

    def score(self, top_logprobs: Sequence[Sequence[float]]) -> float | None:
        """The trace's lowest-group confidence under this hook's window (None: empty trace)."""
        if not len(top_logprobs):
            return None
        return trace_score(token_confidences(top_logprobs, self.k), self.window, "lowest")


def vote_online(candidates: Sequence[Candidate], hook: OnlineDeepConf, stopped: Sequence[bool]) -> Selection:
    """The DeepConf-online vote: traces not stopped whose lowest-group confidence is at least the
    threshold vote, weighted by that confidence. If none can vote, fall back to a majority vote
    of all unstopped traces — counted in ``fallbacks``."""
    answers: list[str | None] = []
    weights: list[float] = []
    for c, cut in zip(candidates, stopped, strict=True):
        s = None if cut or c.answer is None or not c.top_logprobs else hook.score(c.top_logprobs)
        ok = s is not None and (hook.threshold is None or s >= _below(hook.threshold))
        answers.append(c.answer if ok else None)
        weights.append(s if ok and s is not None else 0.0)
    vote = weighted_vote(answers, weights)
    fallbacks = 0
    if vote.answer is None:
        vote = weighted_vote([None if cut else c.answer for c, cut in zip(candidates, stopped, strict=True)])
        fallbacks = int(vote.answer is not None)
    index = None if vote.position is None else candidates[vote.position].index
    return Selection(index=index, answer=vote.answer, method="deepconf-online", fallbacks=fallbacks)


def select_online(
    candidates: Sequence[Candidate],
    *,
    warmup: int = 16,
    eta: float = 0.1,
    window: int = DEFAULT_WINDOW,
    fraction: float = DEFAULT_FRACTION,
    k: int = DEFAULT_K,
) -> Selection:
    """DeepConf online replayed over traces sampled in full, in sample order: the first
    ``warmup`` are the warm-up (generated whole), each later one is cut where the hook would
    have cut it. ``detail`` has ``tokens_used`` (warm-up + every trace up to its cut),
    ``tokens_saved``, ``stopped``, ``threshold`` and ``window``."""
    if candidates and all(c.top_logprobs is None for c in candidates):
        raise ValueError("DeepConf needs top-k logprobs: sample with Sampling(logprobs=True, top_logprobs=k)")
    hook = OnlineDeepConf(window=window, k=k, eta=eta, fraction=fraction)
    warm = list(candidates[:warmup])
    hook.calibrate([c.top_logprobs for c in warm if c.top_logprobs])
    used = sum(c.tokens for c in warm)
    stopped = [False] * len(warm)
    for c in candidates[warmup:]:
        cut = hook.replay(c.top_logprobs, ended=c.finished) if c.top_logprobs else None
        stopped.append(cut is not None)
        used += c.tokens if cut is None else cut
    sel = vote_online(candidates, hook, stopped)
    full = sum(c.tokens for c in candidates)
    sel.detail = {
        "tokens_used": used,
        "tokens_saved": full - used,
        "stopped": sum(stopped),
        "threshold": hook.threshold,
        "window": hook.window,
        "mode": "replay",
    }
    return sel
