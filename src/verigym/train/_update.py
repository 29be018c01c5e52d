"""The consumer's policy update: logprobs forward, loss, minibatches, gradient accumulation.

Old logprobs are the sampling logprobs the policy returned (the policy that sampled *is* π_old),
so no extra forward pass is needed, with any ``num_iterations``; the training forward divides the
logits by the sampling temperature so that, on policy, the ratio is 1 up to float round-off (logged
as ``logprob_diff``). Only rows without sampling logprobs get a no-grad forward for them.

An optimizer step whose loss or gradient norm is not finite is skipped: its gradients are dropped
and neither the optimizer nor the schedule moves (``skipped_optimizer_steps``, ``skip_reason``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from transformers import PreTrainedModel

from verigym.policies.local import release_decode_copies
from verigym.train import losses as L
from verigym.train import packing
from verigym.train._cpu_kernels import on_cpu, training_kernels
from verigym.train._forward import Forward, forward_logprobs, forward_rows
from verigym.train.config import RLConfig
from verigym.train.loss_registry import LossInputs, get_loss
from verigym.train.samples import Row, collate

__all__ = [
    "DataParallel",
    "Forward",
    "TeacherTerm",
    "UpdateState",
    "forward_logprobs",
    "forward_rows",
    "policy_update",
    "set_training",
]

_MODULE_TRAIN = torch.nn.Module.train


_HF_TRAIN = PreTrainedModel.train


def set_training(model: Any, mode: bool) -> None:
    """``model.train(mode)``: the same flag on every module, without ``Module.train``'s recursion
    through ``Module.__setattr__`` (~250 µs for the tiny model, paid at every step's update start and
    end; this ~75 µs). Any module whose class overrides ``train`` (other than transformers' own, which
    only adds a kernel refresh when ``use_kernels`` is on) gets the ordinary call."""
    mods = list(model.modules())
    for m in mods:
        fn = type(m).train
        if fn is not _MODULE_TRAIN and not (fn is _HF_TRAIN and not getattr(m, "use_kernels", True)):
            model.train(mode)
            return
    for m in mods:
        m.__dict__["training"] = mode


class DataParallel(Protocol):
    """The hook for data parallelism (``UpdateState.dist``; ``verigym.scale.ddp.DistContext`` under
    torchrun): which module the update trains, this rank's share of the micro-batches, and the
    collectives after backward, after the metrics and after the update."""

    def module(self, model: Any) -> Any: ...

    def shard(self, chunks: list[list[int]]) -> list[list[int]]: ...

    def sync_grads(self, model: Any) -> None: ...

    def reduce_metrics(self, sums: dict[str, float], tokens: float) -> tuple[dict[str, float], float]: ...

    def finish(self, model: Any) -> None: ...


class TeacherTerm(Protocol):
    """What the update asks of on-policy distillation (``train.distill.Distiller``)."""

    @property
    def wants_logits(self) -> bool: ...

    def token_advantages(self, fwd: Forward, rows: Sequence[Row]) -> torch.Tensor: ...

    def jsd_loss(
        self, fwd: Forward, rows: Sequence[Row], total_tokens: float
    ) -> tuple[torch.Tensor, float]: ...


@dataclass
class UpdateState:
    """Everything the update carries from step to step (saved in checkpoints); ``dist``: the
    data-parallel hook (not saved), None in one process."""

    optimizer: torch.optim.Optimizer
    scheduler: Any
    generator: torch.Generator
    entropy: L.AdaptiveEntropy | None = None
    last_nll: float = math.inf
    extra: dict[str, Any] = field(default_factory=dict)
    dist: DataParallel | None = None


def _chunks(items: Sequence[int], parts: int) -> list[list[int]]:
    parts = max(1, min(parts, len(items)))
    size = math.ceil(len(items) / parts)
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


@contextlib.contextmanager
def _reference(model: Any, ref_model: Any | None) -> Iterator[Any]:
    """The reference policy: a frozen copy, or the base model under a LoRA adapter."""
    if ref_model is not None:
        yield ref_model
    elif hasattr(model, "disable_adapter"):
        with model.disable_adapter():
            yield model
    else:
        raise ValueError("kl_beta > 0 needs a reference model (full fine-tuning keeps a frozen copy)")


@torch.no_grad()
def _fill_logprobs(
    model: Any, rows: list[Row], pad_id: int, temperature: float, micro: int, key: str
) -> None:
    """Compute per-row logprobs with a no-grad forward; store in ``row.logprobs`` or ``row.meta[key]``."""
    for idx in _chunks(range(len(rows)), math.ceil(len(rows) / micro)):
        part = [rows[i] for i in idx]
        batch = collate(part, pad_id).to(next(model.parameters()).device)  # rows are collated on the CPU
        with training_kernels(on_cpu(model)):
            logp, _ = forward_logprobs(model, batch, temperature)
        for j, r in enumerate(part):
            values = [0.0, *logp[j, : len(r.ids) - 1].tolist()]
            if key == "old":
                r.logprobs = values
            else:
                r.meta[key] = values


def policy_update(
    model: Any,
    rows: list[Row],
    cfg: RLConfig,
    state: UpdateState,
    *,
    pad_id: int,
    temperature: float,
    max_len: int,
    ref_model: Any | None = None,
    micro_rows: int = 64,
    share_prefix: bool = True,
    distill: TeacherTerm | None = None,
) -> dict[str, Any]:
    """``num_iterations`` passes of ``minibatches`` optimizer steps over ``rows``; returns metrics.

    ``share_prefix``: run each group's shared prompt once per micro-batch (``forward_rows``);
    ``cfg.packing``: micro-batches of at most ``cfg.pack_tokens`` tokens, each one unpadded sequence
    (``train.packing``). ``distill``: the teacher term (per-token advantages or the JSD loss).
    """
    dist = state.dist  # data parallelism under torchrun (verigym.scale.ddp.DistContext)
    net = model if dist is None else dist.module(model)  # fsdp: the update trains a sharded copy
    set_training(model, True)
    if net is not model:
        set_training(net, True)
    release_decode_copies(model)  # stale after this update's step; not held through its peak
    if any(r.logprobs is None for r in rows):
        _fill_logprobs(model, [r for r in rows if r.logprobs is None], pad_id, temperature, micro_rows, "old")
    if cfg.kl_beta > 0:
        with _reference(model, ref_model) as ref:
            _fill_logprobs(ref, rows, pad_id, temperature, micro_rows, "ref")
    entropy_coef = cfg.entropy_coef
    if state.entropy is not None:
        entropy_coef = state.entropy.coef(state.last_nll)
    want_entropy_grad = entropy_coef != 0.0
    loss_fn = get_loss(cfg.loss)  # the registered loss (train.loss_registry); unknown names fail here
    keep_logits = distill is not None and distill.wants_logits
    cpu = on_cpu(net)  # elsewhere (CUDA) the forward runs without the kernels' per-op Python hop
    sums: dict[str, float] = {}
    tokens_seen = 0.0
    grad_norms: list[float] = []

    def add(name: str, value: float, weight: float) -> None:
        sums[name] = sums.get(name, 0.0) + value * weight

    first_pass = True
    skipped: list[str] = []  # why each skipped optimizer step was skipped
    for _ in range(cfg.num_iterations):
        order = torch.randperm(len(rows), generator=state.generator).tolist()
        for mb in _chunks(order, cfg.minibatches):
            before = (dict(sums), tokens_seen)  # a skipped step's metrics are not the run's
            bad_loss: float | None = None
            mb_rows = [rows[i] for i in mb]
            total_tokens = float(sum(r.model_tokens for r in mb_rows))
            total_seqs = float(
                len(mb_rows)
                if cfg.aggregation == "seq-mean-token-sum-norm"
                else sum(r.model_tokens > 0 for r in mb_rows)
            )
            state.optimizer.zero_grad(set_to_none=True)
            if cfg.packing:  # token-budget micro-batches, each one sequence without padding
                micros = packing.plan_micro_batches(
                    mb_rows, packing.row_starts(mb_rows), share_prefix=share_prefix, budget=cfg.pack_tokens,
                    at_least=cfg.grad_accum,
                )  # fmt: skip
            else:
                micros = _chunks(
                    range(len(mb_rows)), max(cfg.grad_accum, math.ceil(len(mb_rows) / micro_rows))
                )
            for micro in micros if dist is None else dist.shard(micros):
                part = [mb_rows[i] for i in micro or [0]]
                with training_kernels(cpu, model=net):  # oneDNN products, attention by block, lean layers
                    fwd = (
                        packing.forward_packed(net, part, temperature, share_prefix=share_prefix, entropy_grad=want_entropy_grad)
                        if cfg.packing
                        else forward_rows(net, part, pad_id, temperature, share_prefix=share_prefix, entropy_grad=want_entropy_grad, keep_logits=keep_logits)
                    )  # fmt: skip
                if not micro:  # fsdp, a rank with no share: a zero-weight pass keeps the collectives paired
                    (fwd.logp.sum() * 0).backward()  # type: ignore[no-untyped-call]
                    continue
                if distill is not None:  # + c(step)·A^KD_t per token (reverse KL); as is for JSD
                    fwd.adv = distill.token_advantages(fwd, part)
                logp, ent, m, old, adv = fwd.logp, fwd.ent, fwd.mask, fwd.old, fwd.adv
                pl = loss_fn(LossInputs(logp, old, adv, m, state.generator), cfg.loss_options)
                per_token = pl.per_token
                if part[0].weights is not None:  # per-token weights, e.g. verigym.scale's importance weights
                    per_token = per_token * fwd.align([r.weights or [1.0] * len(r.ids) for r in part])
                loss = L.aggregate(
                    per_token,
                    m,
                    cfg.aggregation,
                    total_tokens=total_tokens,
                    total_seqs=total_seqs,
                    max_len=max_len,
                )
                n_tok = float(m.sum())
                if cfg.kl_beta > 0:
                    ref_lp = fwd.align([r.meta["ref"] for r in part])
                    kl = L.kl_k3(logp, ref_lp)
                    loss = loss + cfg.kl_beta * (kl * m).sum() / max(total_tokens, 1.0)
                    add("kl", float((kl.detach() * m).sum()), 1.0)
                if keep_logits:
                    assert distill is not None
                    term, jsd_sum = distill.jsd_loss(fwd, part, total_tokens)
                    loss = loss + term
                    add("distill/jsd", jsd_sum, 1.0)
                assert ent is not None
                if want_entropy_grad:
                    loss = loss - entropy_coef * (ent * m).sum() / max(total_tokens, 1.0)
                loss.backward()  # type: ignore[no-untyped-call]
                loss_value = float(loss.detach())
                if not math.isfinite(loss_value) and bad_loss is None:
                    bad_loss = loss_value
                with torch.no_grad():
                    add("loss", loss_value, 1.0)
                    add("entropy", float((ent * m).sum()), 1.0)
                    add("nll", float((-logp * m).sum()), 1.0)
                    add("clip_frac_low", float((pl.clipped_low.float() * m).sum()), 1.0)
                    add("clip_frac_high", float((pl.clipped_high.float() * m).sum()), 1.0)
                    add("ratio_mean", float((pl.ratio * m).sum()), 1.0)
                    sums["ratio_max"] = max(sums.get("ratio_max", 0.0), float((pl.ratio * m).max()))
                    add("cov_proxy", L.cov_proxy(logp, adv, m), n_tok)
                    if first_pass:
                        add("logprob_diff", float(((logp - old).abs() * m).sum()), 1.0)
                tokens_seen += n_tok
            if dist is not None:
                dist.sync_grads(net)
            norm = float(torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm))
            # A non-finite loss or gradient never reaches AdamW (whose moments it would poison for
            # good): the step is skipped, the gradients dropped, the optimizer and schedule untouched.
            # Under data parallelism the gradients are all-reduced, so every rank sees the same norm.
            if not math.isfinite(norm) or (bad_loss is not None and dist is None):
                skipped.append(
                    f"non-finite loss ({bad_loss!r})"
                    if bad_loss is not None and dist is None
                    else f"non-finite gradient norm ({norm!r})"
                )
                state.optimizer.zero_grad(set_to_none=True)
                sums.clear()
                sums.update(before[0])
                tokens_seen = before[1]
                continue
            grad_norms.append(norm)
            state.optimizer.step()
            state.scheduler.step()
        first_pass = False
    # the last step's gradients are never read again (each minibatch starts from none): not held
    # through the next generation (a parameter's size again: 540 MB of a SmolLM2 process, issue 43)
    state.optimizer.zero_grad(set_to_none=True)
    if dist is not None:
        sums, tokens_seen = dist.reduce_metrics(sums, tokens_seen)
        dist.finish(model)
    first_tokens = float(sum(r.model_tokens for r in rows))
    out: dict[str, Any] = {
        k: v / max(tokens_seen, 1.0)
        for k, v in sums.items()
        if k not in ("loss", "ratio_max", "logprob_diff")
    }
    out["loss"] = sums.get("loss", 0.0) / max(len(grad_norms), 1)
    out["ratio_max"] = sums.get("ratio_max", 0.0)
    out["logprob_diff"] = sums.get("logprob_diff", 0.0) / max(first_tokens, 1.0)
    out["grad_norm"] = sum(grad_norms) / max(len(grad_norms), 1)
    out["optimizer_steps"] = float(len(grad_norms))
    out["skipped_optimizer_steps"] = float(len(skipped))
    if skipped:
        out["skip_reason"] = skipped[0]
    out["entropy_coef"] = entropy_coef
    out["lr"] = float(state.optimizer.param_groups[0]["lr"])
    if state.entropy is not None and grad_norms and "nll" in out:
        state.last_nll = out["nll"]
        state.entropy.update(out["nll"])
    set_training(model, False)
    return out
