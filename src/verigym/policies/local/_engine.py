"""The batched sampling loop under ``LocalPolicy`` and ``verigym serve``.

Rows (prompt token ids + per-row sampling settings) are left-padded into one batch and decoded with a
KV cache; identical prompts are prefilled once and their cache rows repeated (``n`` samples of one
prompt cost one prefill). Each row stops on its own (EOS, a stop string, its ``max_tokens``, or an
``EarlyStop`` callback); finished rows are pruned from the batch and cache.

Randomness is per row and counter-based: the uniform draw of row ``r`` at completion position ``t`` is
SplitMix64(mix(seed_r) + (t+1)·φ) (Steele et al., 2014, "Fast splittable pseudorandom number
generators"), used for inverse-CDF sampling. A row's samples therefore depend only on its own seed and
logits, so a batched run equals one-at-a-time runs with the same per-row seeds, and the global torch RNG
is never touched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from verigym.policies.local._grammar import Constraint, Masks

__all__ = ["EarlyStop", "RowResult", "RowSpec", "run_rows"]

_FLUSH_AHEAD = 16
"""Finished rows are handed back mid-pass (``flush``) only while the pass may run more than this many
more steps; otherwise at its end: a request never waits more than this many steps for the rest of the
pass, and short passes (RL's) do not wake the caller's loop at every step to contend for the GIL."""

_TRIM_MIN = 32
"""A continuous pass drops the cache positions before its live rows' earliest token once there are at
least this many and they are a quarter of the cache (``FastLlama.trim``): a copy of the live cache that
every later step repays by attending over fewer keys."""

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


class PassCancelled(Exception):
    """A generation pass ended early because its ``stop`` event was set."""


class EarlyStop(Protocol):
    """A per-row stopping rule evaluated at every generation step (e.g. DeepConf-online).

    Called after each sampled token as ``early_stop(row, top_logprobs)`` where ``row`` is the index of
    the prompt row in the ``generate`` call and ``top_logprobs`` is that row's list so far, one tuple
    per completion token holding the top-k logprobs in descending order (k = ``sampling.top_logprobs``,
    or 20 when that is 0). Return True to stop the row now: its completion keeps the tokens sampled so
    far and gets ``finish_reason="early_stop"``. The list is the engine's own: read it, do not mutate it.
    DeepConf (Fu et al., 2025, "Deep Think with Confidence") stops a trace once the mean of
    ``-mean(top_k)`` over a sliding window drops below a threshold calibrated on warm-up traces.
    """

    def __call__(self, row: int, top_logprobs: Sequence[tuple[float, ...]]) -> bool: ...


@dataclass
class RowSpec:
    """One row to generate: its prompt ids and its own sampling settings."""

    prompt_ids: list[int]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    seed: int = 0
    top_logprobs: int = 0
    early_stop: EarlyStop | None = None
    early_stop_row: int = 0
    on_token: Callable[[int], None] | None = None  # called (in the generating thread) with each new id
    constraint: Constraint | None = None  # a grammar the row must follow (``_grammar``: structured outputs)
    cancelled: bool = False  # set by the caller (a client hung up): the row stops at its next step


@dataclass
class RowResult:
    """What one row produced; ``finish`` is ``eos``, ``stop_string``, ``length``, ``early_stop`` or
    ``cancelled``."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_ids: list[tuple[int, ...]] = field(default_factory=list)
    top_logprobs: list[tuple[float, ...]] = field(default_factory=list)
    finish: str = "length"


def _cat(a: Any, b: Any) -> Any:
    import torch

    return torch.cat([a, b])


def _splitmix(z: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    out: np.ndarray[Any, Any] = z ^ (z >> np.uint64(31))
    return out


def uniforms(seeds: np.ndarray[Any, Any], steps: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Uniform floats in [0, 1) for each (seed, step) pair; deterministic and independent of batching."""
    with np.errstate(over="ignore"):
        state = _splitmix(seeds.astype(np.uint64)) + (steps.astype(np.uint64) + np.uint64(1)) * _GOLDEN
        bits = _splitmix(state) >> np.uint64(11)
    out: np.ndarray[Any, Any] = bits.astype(np.float64) * (1.0 / (1 << 53))
    return out


class _Batch:
    """The live rows of one generation pass and their per-row settings as tensors (and, as plain
    flags, which of ``_sample``'s branches any live row needs)."""

    def __init__(self, specs: Sequence[RowSpec], device: Any) -> None:
        import torch

        self.rows = list(range(len(specs)))  # position in batch -> index into specs
        self.order = list(self.rows)  # positions by ascending row: rows are handled in request order
        self.settings = [(s.temperature, s.top_p, s.top_k) for s in specs]
        self.temp = torch.tensor([s.temperature for s in specs], dtype=torch.float32, device=device)
        self.top_p = torch.tensor([s.top_p for s in specs], dtype=torch.float32, device=device)
        self.top_k = torch.tensor([s.top_k for s in specs], dtype=torch.long, device=device)
        self.seeds = np.array([s.seed & 0xFFFFFFFFFFFFFFFF for s in specs], dtype=np.uint64)
        self._flags()

    def _flags(self) -> None:
        temps = [t for t, _, _ in self.settings]
        self.greedy = any(t <= 0 for t in temps)
        self.all_greedy = all(t <= 0 for t in temps)
        self.unit_temp = all(t == 1 or t <= 0 for t in temps)  # logits / 1 is the logits, bit for bit
        self.truncated = any(p < 1 or k > 0 for _, p, k in self.settings)

    def extend(self, specs: Sequence[RowSpec], rows: range) -> None:
        more = _Batch(specs, self.temp.device)
        self.order += [len(self.rows) + j for j in range(len(more.rows))]
        self.rows += list(rows)
        self.settings += more.settings
        self.temp, self.top_p = _cat(self.temp, more.temp), _cat(self.top_p, more.top_p)
        self.top_k = _cat(self.top_k, more.top_k)
        self.seeds = np.concatenate([self.seeds, more.seeds])
        self._flags()

    def keep(self, idx: list[int]) -> None:
        import torch

        t = torch.tensor(idx, dtype=torch.long, device=self.temp.device)
        self.rows = [self.rows[i] for i in idx]
        self.order = sorted(range(len(idx)), key=self.rows.__getitem__)
        self.settings = [self.settings[i] for i in idx]
        self.temp, self.top_p, self.top_k = self.temp[t], self.top_p[t], self.top_k[t]
        self.seeds = self.seeds[idx]
        self._flags()


def _sample(logits: Any, batch: _Batch, steps: np.ndarray[Any, Any], processed: bool) -> tuple[Any, Any, Any]:
    """(tokens, logprobs reported, logprob distribution reported) for one step of the live rows.

    Branches no live row needs are skipped (the division by a temperature of 1, the argmax when no row
    is greedy and no draw fell past the last kept token): the same numbers with fewer ops per step.
    """
    import torch

    greedy = batch.temp <= 0 if batch.greedy else None
    if batch.unit_temp:
        logp = torch.log_softmax(logits, dim=-1)
    else:
        temp = batch.temp if greedy is None else torch.where(greedy, torch.ones_like(batch.temp), batch.temp)
        logp = torch.log_softmax(logits / temp[:, None], dim=-1)
    work = logp
    if batch.truncated:
        sorted_lp, order = logp.sort(dim=-1, descending=True)
        ranks = torch.arange(logp.shape[-1], device=logp.device)[None, :]
        probs = sorted_lp.exp()
        before = probs.cumsum(dim=-1) - probs  # mass strictly above each token
        drop = (before >= batch.top_p[:, None]) & (ranks > 0) & (batch.top_p[:, None] < 1)
        drop |= (batch.top_k[:, None] > 0) & (ranks >= batch.top_k[:, None])
        work = logp.scatter(-1, order, sorted_lp.masked_fill(drop, float("-inf")))
        work = torch.log_softmax(work, dim=-1)
    if batch.all_greedy:  # what the draw below ends in for greedy rows, without the draw
        tokens = work.argmax(dim=-1)
        dist = work if processed else logp
        return tokens, dist.gather(-1, tokens[:, None]).squeeze(-1), dist
    probs = work.exp()
    cdf = probs.cumsum(dim=-1)
    u = torch.from_numpy(uniforms(batch.seeds, steps)).to(device=cdf.device, dtype=cdf.dtype)
    tokens = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).squeeze(-1)
    tokens = tokens.clamp_(max=logits.shape[-1] - 1)
    bad = probs.gather(-1, tokens[:, None]).squeeze(-1) <= 0  # float round-off past the last kept token
    if greedy is not None:
        tokens = torch.where(bad | greedy, work.argmax(dim=-1), tokens)
    elif bool(bad.any()):
        tokens = torch.where(bad, work.argmax(dim=-1), tokens)
    dist = work if processed else logp
    return tokens, dist.gather(-1, tokens[:, None]).squeeze(-1), dist


def run_rows(
    model: Any,
    tokenizer: Any,
    specs: Sequence[RowSpec],
    *,
    eos_ids: Sequence[int],
    pad_id: int,
    processed_logprobs: bool = False,
    fast: bool = True,
    admit: Callable[[int, int, int], list[RowSpec]] | None = None,
    deliver: Callable[[RowSpec, RowResult], None] | None = None,
    headroom: float = 1.0,
    flush: Callable[[], None] | None = None,
    stop: threading.Event | None = None,
) -> list[RowResult]:
    """Generate every row of ``specs`` in one batched pass; the caller holds no-grad/eval state.

    ``stop``, once set (from another thread: Ctrl-C, SIGTERM, a cancelled request), ends the pass at the
    next decode step with ``PassCancelled``.

    ``fast`` uses ``FastLlama`` where the model is a plain Llama (same numbers, less overhead).
    Continuous batching: on that path ``admit(length, live, room)`` is asked at every step for rows to join
    the running batch: prompts of at most ``length`` tokens (the cache length so far; they are left-padded
    to it) and ``max_tokens`` of at most ``room`` (the cache is sized once, with ``headroom`` × the longest
    ``max_tokens`` extra for joiners, so the pass ends); ``deliver(spec, result)`` is called as soon as a row finishes,
    and ``flush()`` after a step's rows were delivered while the pass may still run more than ``_FLUSH_AHEAD``
    steps (the caller resolves the rest when the pass returns). Results of admitted rows are delivered only (the
    returned list covers ``specs``).
    """
    import torch

    from verigym.policies.local._fast_llama import FastLlama, supported
    from verigym.policies.local._products import StepThreads

    device = next(model.parameters()).device
    specs = list(specs)
    results = [RowResult() for _ in specs]
    first = len(specs)
    if not specs:
        return results
    # Prefill each distinct prompt once, then repeat its cache rows for every row that shares it.
    unique: dict[tuple[int, ...], int] = {}
    row_of = [unique.setdefault(tuple(s.prompt_ids), len(unique)) for s in specs]
    prompts = list(unique)
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p) :] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp_(min=0)
    step: Any
    if fast and supported(model):
        longest = max(s.max_tokens for s in specs)
        step = FastLlama(model, len(prompts), width + longest + (int(longest * headroom) if admit else 0))
    else:
        step = _HFStep(model)
    logits = step(ids, positions, mask).float()
    expand = torch.tensor(row_of, dtype=torch.long, device=device)
    if row_of != list(range(len(specs))):
        step.select(expand)
        logits = logits[expand]
    mask, next_pos = mask[expand], positions[expand, -1] + 1

    batch = _Batch(specs, device)
    eos = torch.tensor(sorted(set(eos_ids)), dtype=torch.long, device=device)
    want_top = max((s.top_logprobs or (20 if s.early_stop else 0)) for s in specs)
    lengths = np.zeros(len(specs), dtype=np.int64)
    limits = np.array([s.max_tokens for s in specs], dtype=np.int64)
    max_stop = {i: max(len(x) for x in s.stop) + 8 for i, s in enumerate(specs) if s.stop}
    dead: set[int] = set()  # batch positions finished but not yet pruned
    masks = Masks(logits.shape[-1])  # grammar matchers of the constrained rows (structured outputs)
    masks.add(specs)
    with StepThreads(step.timed_step if isinstance(step, FastLlama) else None) as threads:
        while True:
            threads.next(len(batch.rows))  # this step runs on its own thread choice (FastLlama)
            if stop is not None and stop.is_set():
                raise PassCancelled("the generation pass was cancelled")
            if masks.matchers:  # before sampling: the constrained distribution is the one sampled and logged
                masks.apply(logits, batch.rows, dead, (limits[batch.rows] - lengths[batch.rows]).tolist())
            tokens, chosen_lp, dist = _sample(logits, batch, lengths[batch.rows], processed_logprobs)
            is_eos = torch.isin(tokens, eos)
            tok_list, lp_list, eos_list = tokens.tolist(), chosen_lp.tolist(), is_eos.tolist()
            top_v = top_i = None
            if want_top:
                tv, ti = dist.topk(min(want_top, dist.shape[-1]), dim=-1)
                top_v, top_i = tv.tolist(), ti.tolist()
            for pos in batch.order:
                if pos in dead:
                    continue
                row = batch.rows[pos]
                spec, res = specs[row], results[row]
                res.token_ids.append(tok_list[pos])
                res.logprobs.append(lp_list[pos])
                lengths[row] += 1
                if top_v is not None and top_i is not None and (spec.top_logprobs or spec.early_stop):
                    k = spec.top_logprobs or 20
                    res.top_logprobs.append(tuple(top_v[pos][:k]))
                    res.top_ids.append(tuple(top_i[pos][:k]))
                if spec.on_token is not None:
                    spec.on_token(tok_list[pos])
                if masks.matchers:
                    masks.accept(row, tok_list[pos])
                finish = None
                if spec.cancelled:
                    finish = "cancelled"
                elif eos_list[pos]:
                    finish = "eos"
                elif row in max_stop and _hits_stop(tokenizer, res.token_ids, spec.stop, max_stop[row]):
                    finish = "stop_string"
                elif spec.early_stop is not None and spec.early_stop(spec.early_stop_row, res.top_logprobs):
                    finish = "early_stop"
                elif lengths[row] >= spec.max_tokens:
                    finish = "length"
                if finish is not None:
                    res.finish = finish
                    dead.add(pos)
                    masks.drop(row)
                    if deliver is not None:
                        deliver(spec, res)
            if len(dead) == len(batch.rows):
                break
            if flush is not None and int((limits[batch.rows] - lengths[batch.rows]).max()) > _FLUSH_AHEAD:
                flush()
            # Finished rows leave the lean path's batch at once (moving a row costs about one step of its
            # attention); the generic cache is re-indexed whole, so there they leave in bulk. Either way a
            # batch is pruned whenever at most 3 rows are left (matmuls of 1-3 rows round differently
            # from those of 4 or more, so the batch sizes below 4 are kept as they were).
            eager = isinstance(step, FastLlama)
            if dead and (eager or len(dead) * 4 >= len(batch.rows) or len(batch.rows) - len(dead) <= 2):
                keep = _compacted(len(batch.rows), dead)
                sel = torch.tensor(keep, dtype=torch.long, device=device)
                if eager:
                    step.keep(keep)
                else:
                    step.select(sel)
                batch.keep(keep)
                tokens, mask, next_pos = tokens[sel], mask[sel], next_pos[sel]
                dead = set()
            else:
                tokens = tokens.masked_fill(is_eos, pad_id)
            if (
                eager and len(specs) > first
            ):  # rows joined, so the cache may start with positions no live row uses
                unused = int(mask.argmax(dim=1).min())  # the earliest real token of any live row
                if unused >= _TRIM_MIN and 4 * unused >= step.length:
                    step.trim(unused)
                    mask = mask[:, unused:]
            mask = torch.cat([mask, torch.ones((mask.shape[0], 1), dtype=mask.dtype, device=device)], dim=1)
            logits = step(tokens[:, None], next_pos[:, None], mask).float()
            next_pos = next_pos + 1
            new = []
            if admit is not None and isinstance(step, FastLlama) and step.capacity > step.length:
                new = admit(step.length, len(batch.rows) - len(dead), step.capacity - step.length)
            if new:
                base = len(specs)
                specs += new
                results += [RowResult() for _ in new]
                lengths = np.concatenate([lengths, np.zeros(len(new), dtype=np.int64)])
                limits = np.concatenate([limits, np.array([s.max_tokens for s in new], dtype=np.int64)])
                max_stop.update(
                    {base + j: max(len(x) for x in s.stop) + 8 for j, s in enumerate(new) if s.stop}
                )
                want_top = max([want_top, *((s.top_logprobs or (20 if s.early_stop else 0)) for s in new)])
                masks.add(new, base)
                joined, new_mask, new_pos = _prefill_joining(step, new, pad_id, device)
                logits = torch.cat([logits, joined.float()])
                mask, next_pos = torch.cat([mask, new_mask]), torch.cat([next_pos, new_pos])
                batch.extend(new, range(base, base + len(new)))
    return results[:first]


def _compacted(size: int, dead: set[int]) -> list[int]:
    """The live positions of a batch of ``size`` rows, in the order that moves fewest cache rows: a row
    stays where it is, and the holes that finished rows leave are filled by live rows from the end (each
    row's numbers do not depend on its position in the batch)."""
    n = size - len(dead)
    movers = [p for p in range(n, size) if p not in dead]
    movers.reverse()
    return [p if p not in dead else movers.pop() for p in range(n)]


def _prefill_joining(step: Any, new: list[RowSpec], pad_id: int, device: Any) -> tuple[Any, Any, Any]:
    """Prefill rows joining a running ``FastLlama`` batch (only their own tokens, right-aligned at its
    cache length: ``FastLlama.append``); returns (last logits, key mask, next positions) of the new rows."""
    import torch

    width = max(len(s.prompt_ids) for s in new)
    ids = torch.full((len(new), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(new), step.length), dtype=torch.long)
    for i, s in enumerate(new):
        ids[i, width - len(s.prompt_ids) :] = torch.tensor(s.prompt_ids, dtype=torch.long)
        mask[i, step.length - len(s.prompt_ids) :] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask[:, -width:].cumsum(-1) - 1).clamp_(min=0)
    logits = step.append(ids, positions, mask)
    return logits, mask, positions[:, -1] + 1


class _HFStep:
    """The ordinary ``transformers`` forward with a ``DynamicCache``, behind the ``FastLlama`` interface."""

    def __init__(self, model: Any) -> None:
        from transformers import DynamicCache

        self.model, self.cache = model, DynamicCache()

    def __call__(self, ids: Any, positions: Any, mask: Any) -> Any:
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            cache=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1, :]

    def select(self, index: Any) -> None:
        self.cache.batch_select_indices(index)


def _hits_stop(tokenizer: Any, ids: list[int], stop: tuple[str, ...], window: int) -> bool:
    tail = tokenizer.decode(ids[-window:], skip_special_tokens=True)
    return any(s and s in tail for s in stop)
