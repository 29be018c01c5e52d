"""Supervised fine-tuning on verified trajectories: the light warm-up before RL.

The seed lectures' recipe: imitate first, then explore — SFT only has to make sampling meaningful,
so keep it light (stop at a partial accuracy with ``target_pass_at_1``) and the demonstrations
diverse. Data: the ``results.jsonl`` of an eval (exact token ids are used when the policy
returned them; errored or failed samples are skipped), a JSONL of ``{"messages": [...]}`` (and
optional ``"tools"``), or demonstrations from an environment's oracle, verified by its rubric.
The loss is the token-mean NLL over assistant tokens only (the loss mask). With ``packing`` several
rows share a sequence, separated by a block-diagonal attention mask (no cross-contamination). A real
model on a CPU (``_cpu_kernels.lean_training``) trains through the RL update's forward instead: each
micro-batch one packed sequence (``packing.forward_packed``, so ``pack_length`` does not apply),
oneDNN products, lean layers, the head by chunks over the loss positions, and fused AdamW — the same
step within float round-off, about half the time and memory on SmolLM2 (issue 43).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from verigym._files import read_jsonl
from verigym.envs.base import Environment
from verigym.runner import run_rollouts
from verigym.train.config import SFTConfig
from verigym.train.samples import NotTrainable, Row, collate, trajectory_sequences
from verigym.types import Message, Record, Sampling

__all__ = [
    "SFTDataError",
    "load_sft_rows",
    "messages_row",
    "oracle_demos",
    "pack",
    "packed_logprobs",
    "sft_train",
]


class SFTDataError(ValueError):
    """A line of an SFT file that is neither a results record nor a messages object."""


def _encode(
    tokenizer: Any, messages: Sequence[Message], tools: Any, gen: bool, tool_format: str | None
) -> list[int]:
    from verigym.policies.local.chat import encode_chat  # the exact rendering LocalPolicy samples with

    return encode_chat(tokenizer, messages, tools, add_generation_prompt=gen, tool_format=tool_format)


def messages_row(
    tokenizer: Any, messages: Sequence[Message], tools: Any = None, *, tool_format: str | None = None
) -> Row:
    """Tokenise a conversation with the chat template; mask 1 exactly on the assistant turns, up to and
    including their EOS: what a template writes after it (ChatML's newline after ``<|im_end|>``) is never
    sampled, so it is not trained."""
    eos = getattr(tokenizer, "eos_token_id", None)
    ids: list[int] = []
    mask: list[int] = []
    for i, m in enumerate(messages):
        if m.role != "assistant":
            continue
        prefix = _encode(tokenizer, messages[:i], tools, True, tool_format)
        full = _encode(tokenizer, messages[: i + 1], tools, False, tool_format)
        if prefix[: len(ids)] != ids or full[: len(prefix)] != prefix:
            raise SFTDataError("the chat template does not render this conversation prefix-consistently")
        span = full[len(prefix) :]
        sampled = len(span) - span[::-1].index(eos) if eos in span else len(span)
        mask += [0] * (len(prefix) - len(ids)) + [1] * sampled + [0] * (len(span) - sampled)
        ids = full
    if not any(mask):
        raise SFTDataError("a conversation without an assistant turn")
    return Row(ids=ids, mask=mask, logprobs=None)


def load_sft_rows(
    path: str | Path, tokenizer: Any, *, min_reward: float = 1.0, tool_format: str | None = None
) -> list[Row]:
    """Rows from a results.jsonl (records below ``min_reward`` or errored are skipped) or a messages JSONL,
    rendered with ``tool_format`` (None: the tokenizer's default, as ``LocalPolicy`` renders)."""
    rows: list[Row] = []
    p = Path(path)
    if not p.is_file():
        raise SFTDataError(f"{p}: no such file")
    for where, obj in read_jsonl(p, error=SFTDataError):
        try:
            if "trajectory" in obj:
                rec = Record.model_validate(obj)
                if rec.error is not None or rec.score.reward is None or rec.score.reward < min_reward:
                    continue
                try:
                    rows += trajectory_sequences(rec.trajectory)
                except NotTrainable:
                    rows.append(messages_row(tokenizer, rec.trajectory.messages, tool_format=tool_format))
            elif "messages" in obj:
                msgs = [Message.model_validate(m) for m in obj["messages"]]
                rows.append(messages_row(tokenizer, msgs, obj.get("tools"), tool_format=tool_format))
            else:
                raise SFTDataError("expected a results record or an object with 'messages'")
        except SFTDataError as exc:
            raise SFTDataError(f"{where}: {exc}") from None
        except ValueError as exc:  # pydantic validation
            raise SFTDataError(f"{where}: {str(exc).splitlines()[0]}") from None
    for r in rows:
        r.logprobs = None
    return rows


async def oracle_demos(
    env: Environment, n: int, *, seed: int = 0, env_name: str = "env"
) -> list[list[Message]]:
    """``n`` demonstrations of the train split from the env's oracle, kept only if its rubric passes them."""
    oracle = env.oracle_policy()
    if oracle is None:
        raise SFTDataError(f"environment {env_name!r} has no oracle policy to demonstrate with")
    tasks = env.tasks(n, seed=seed, split="train")
    records = await run_rollouts(
        env, oracle, tasks, samples_per_task=1, sampling=Sampling(temperature=0.0), concurrency=64,
        env_name=env_name, model_name=oracle.name,
    )  # fmt: skip
    return [r.trajectory.messages for r in records if r.error is None and (r.score.reward or 0.0) >= 1.0]


def sft_train(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Row],
    cfg: SFTConfig,
    *,
    seed: int = 0,
    evaluate: Callable[[], float] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Train in place; ``evaluate()`` (held-out pass@1) runs every ``eval_every`` steps and at the end,
    and training stops early once it reaches ``target_pass_at_1``. Returns a summary."""
    from verigym.train._cpu_kernels import lean_training
    from verigym.train.optim import make_optimizer

    if not rows:
        raise SFTDataError("no SFT rows to train on")
    device = next(model.parameters()).device
    pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)
    gen = torch.Generator().manual_seed(seed)
    per_epoch = math.ceil(len(rows) / cfg.batch_size)
    total = cfg.max_steps or per_epoch * cfg.epochs
    # a real model on a CPU: fused AdamW, as the RL update (the tiny models keep the per-tensor loop)
    opt, sched = make_optimizer(
        model.parameters(), cfg, total, foreach=True if lean_training(model) else None
    )
    step, last_eval, t0 = 0, math.nan, time.perf_counter()
    stopped_early = False
    while step < total and not stopped_early:
        order = torch.randperm(len(rows), generator=gen).tolist()
        for start in range(0, len(order), cfg.batch_size):
            if step >= total:
                break
            batch_rows = [rows[i] for i in order[start : start + cfg.batch_size]]
            loss_value = _sft_step(model, batch_rows, cfg, pad, device, opt)
            sched.step()
            step += 1
            info: dict[str, Any] = {
                "phase": "sft",
                "step": step,
                "loss": loss_value,
                "lr": sched.get_last_lr()[0],
            }
            if evaluate is not None and cfg.eval_every and (step % cfg.eval_every == 0 or step == total):
                last_eval = evaluate()
                info["eval/pass_at_1"] = last_eval
                target = cfg.target_pass_at_1
                if (
                    target is not None and last_eval is not None and last_eval >= target
                ):  # None: nothing scored
                    stopped_early = True
            if on_step is not None:
                on_step(info)
            if stopped_early:
                break
    model.eval()
    return {
        "steps": step,
        "pass_at_1": last_eval,
        "stopped_early": stopped_early,
        "wall_s": time.perf_counter() - t0,
    }


def _sft_step(
    model: Any, rows: list[Row], cfg: SFTConfig, pad: int, device: Any, opt: torch.optim.Optimizer
) -> float:
    from verigym.policies.local import release_decode_copies
    from verigym.train import packing
    from verigym.train._cpu_kernels import lean_training, training_kernels
    from verigym.train._update import forward_logprobs

    release_decode_copies(model)  # stale after every step: not held beside the step's activations
    model.train()
    lean = lean_training(model)
    total_tokens = float(sum(r.model_tokens for r in rows))
    opt.zero_grad(set_to_none=True)
    size = math.ceil(len(rows) / cfg.grad_accum)
    value = 0.0
    for i in range(0, len(rows), size):
        part = rows[i : i + size]
        if lean:  # a real model on a CPU: the RL update's forward (one packed sequence, oneDNN
            # products, lean layers, the head by chunks without the [tokens x vocab] logits)
            with training_kernels(True, model=model):
                fwd = packing.forward_packed(model, part, 1.0, share_prefix=False, entropy_grad=False)
            logp, mask = fwd.logp, fwd.mask
        elif cfg.packing:
            logp, mask = packed_logprobs(model, part, pad, cfg.pack_length, device)
        else:
            batch = collate(part, pad).to(device)
            logp, _ = forward_logprobs(model, batch, 1.0)
            mask = batch.mask
        loss = -(logp * mask).sum() / max(total_tokens, 1.0)
        loss.backward()  # type: ignore[no-untyped-call]
        value += float(loss.detach())
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)  # not held through a held-out eval's generation
    return value


def pack(rows: Sequence[Row], length: int) -> list[list[Row]]:
    """First-fit-decreasing bins of rows whose total length is ≤ ``length`` (a longer row gets its own)."""
    bins: list[list[Row]] = []
    sizes: list[int] = []
    for r in sorted(rows, key=lambda r: -len(r.ids)):
        for j, used in enumerate(sizes):
            if used + len(r.ids) <= length:
                bins[j].append(r)
                sizes[j] += len(r.ids)
                break
        else:
            bins.append([r])
            sizes.append(len(r.ids))
    return bins


def packed_logprobs(
    model: Any, rows: Sequence[Row], pad: int, length: int, device: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token logprobs and loss mask (B, T−1) of rows packed several to a sequence.

    Each row keeps its own positions (restarting at 0) and attends only to itself through a
    block-diagonal causal 4D mask, so the result equals the unpacked forward, with less padding.
    """
    from verigym.train.losses import token_logprobs

    bins = pack(rows, length)
    width = max(sum(len(r.ids) for r in b) for b in bins)
    n = len(bins)
    ids = torch.full((n, width), pad, dtype=torch.long)
    pos = torch.zeros((n, width), dtype=torch.long)
    seg = torch.full((n, width), -1, dtype=torch.long)
    lmask = torch.zeros((n, width), dtype=torch.float32)
    for i, b in enumerate(bins):
        at = 0
        for k, r in enumerate(b):
            span = slice(at, at + len(r.ids))
            ids[i, span] = torch.tensor(r.ids)
            pos[i, span] = torch.arange(len(r.ids))
            seg[i, span] = k
            lmask[i, span] = torch.tensor(r.mask, dtype=torch.float32)
            at += len(r.ids)
    causal = torch.tril(torch.ones(width, width, dtype=torch.bool))
    attend = (seg[:, :, None] == seg[:, None, :]) & causal
    attend |= torch.eye(width, dtype=torch.bool)  # padding attends to itself (no empty softmax rows)
    out = model(
        input_ids=ids.to(device),
        attention_mask=attend[:, None].to(device),
        position_ids=pos.to(device),
        use_cache=False,
    )
    logp = token_logprobs(out.logits[:, :-1], ids[:, 1:].to(device))
    same = (seg[:, 1:] == seg[:, :-1]) & (seg[:, 1:] >= 0)
    return logp, (lmask[:, 1:] * same).to(device)
