"""On-policy distillation: a teacher scores the student's own samples, token by token, beside the
verified reward (``[rl.distill]``, ``config.DistillConfig``).

The student samples y ~ π_S(·|x) at the sampling temperature T; the teacher's log-probability of
each sampled token is computed at the same temperature and the same positions,
log π_T(y_t | x, y_<t) = log_softmax(z_T / T)[y_t], by an in-process model or a served one (a
``/v1/completions`` request with ``echo`` and ``max_tokens = 0`` returning the prompt's logprobs, as
``verigym serve`` and vLLM answer).

**Reverse KL as a per-token advantage** (Agarwal et al. 2024, "On-Policy Distillation of Language
Models: Learning from Self-Generated Mistakes" (GKD), arXiv:2306.13649; Thinking Machines Lab 2025,
"On-Policy Distillation"; Gu et al. 2024, MiniLLM, arXiv:2306.08543)::

    A^KD_t = −(log π_S(y_t) − log π_T(y_t)) = log π_T(y_t) − log π_S(y_t)

with log π_S the sampling logprobs (π_old). E_{y_t ~ π_S}[−A^KD_t] = KL(π_S ‖ π_T) at that
position, so the policy gradient of E[Σ_t A^KD_t] (A^KD held fixed, discount 0) descends the
reverse KL of the student's own trajectories: mode seeking, on the states the student visits. The
advantage of token t is::

    A_t = reward_coef · A^R + c(step) · A^KD_t · [not excluded]

where A^R is the verified-reward advantage of the sample (GRPO & co.), c the coefficient schedule,
and ``exclude_passed`` excludes samples whose reward passed the verifier. It enters the same
PPO-clip / GSPO / … loss as A^R (``losses``), so the ratio and clipping are the policy loss's.

**Generalised JSD as a loss** (GKD, eq. 2): with P_T, P_S the full next-token distributions at
temperature T and M = β P_T + (1 − β) P_S::

    JSD_β(P_T ‖ P_S) = β KL(P_T ‖ M) + (1 − β) KL(P_S ‖ M)

at each model-token position of the student's samples; β = 0 is the forward KL(P_T ‖ P_S) and
β = 1 the reverse KL(P_S ‖ P_T) (the limits of JSD_β / β and JSD_β / (1 − β), as TRL's
``GKDTrainer`` defines them). The term c(step) · Σ_t JSD_t / N_tokens is added to the policy loss.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from verigym.policies.spec import ModelSpec, api_key_for
from verigym.train._forward import Forward, forward_rows
from verigym.train._update import _fill_logprobs
from verigym.train.config import ConfigError, DistillConfig, TrainConfig
from verigym.train.samples import Row, collate

__all__ = [
    "PROBE",
    "Distiller",
    "InProcessTeacher",
    "ServedTeacher",
    "check_tokenizers",
    "distill_coef",
    "generalized_jsd",
    "reverse_kl_advantages",
    "teaches",
]

PROBE = 'verigym probe: 12+34=46; The quick brown fox, über café ½!\n\t{"x": [1, 2]}'
"""The text whose token ids the student's and the teacher's tokenizers must agree on."""


def distill_coef(cfg: DistillConfig, step: int, steps: int) -> float:
    """c(step): ``coef`` (constant), or from ``coef`` at step 0 to ``final_coef`` at step
    ``decay_steps − 1`` (default ``steps − 1``) linearly or along a half cosine, then held."""
    if cfg.schedule == "constant":
        return cfg.coef
    total = cfg.decay_steps or steps
    frac = min(max(step, 0) / max(total - 1, 1), 1.0)
    if cfg.schedule == "linear":
        return cfg.coef + (cfg.final_coef - cfg.coef) * frac
    return cfg.final_coef + (cfg.coef - cfg.final_coef) * 0.5 * (1 + math.cos(math.pi * frac))


def teaches(cfg: TrainConfig, step: int, rewards: Sequence[float]) -> bool:
    """Whether a group with these rewards gets a teacher term at ``step`` (dynamic sampling keeps it)."""
    d = cfg.rl.distill
    if d is None or distill_coef(d, step, cfg.rl.steps) <= 0:
        return False
    return not d.exclude_passed or any(r < 1.0 for r in rewards)


def reverse_kl_advantages(student_logp: Tensor, teacher_logp: Tensor, mask: Tensor) -> Tensor:
    """A^KD_t = −(log π_S(y_t) − log π_T(y_t)) on model tokens (``mask``), 0 elsewhere."""
    return (teacher_logp - student_logp) * mask


def generalized_jsd(
    student_logits: Tensor, teacher_logits: Tensor, beta: float, temperature: float = 1.0
) -> Tensor:
    """JSD_β(P_T ‖ P_S) per position (module doc): (B, T, V) logits → (B, T), in float32 at least."""
    dtype = torch.promote_types(student_logits.dtype, torch.float32)
    s = torch.log_softmax(student_logits.to(dtype) / temperature, dim=-1)
    t = torch.log_softmax(teacher_logits.to(dtype) / temperature, dim=-1)
    if beta <= 0:
        return (t.exp() * (t - s)).sum(-1)
    if beta >= 1:
        return (s.exp() * (s - t)).sum(-1)
    m = torch.logsumexp(torch.stack([t + math.log(beta), s + math.log(1 - beta)]), dim=0)
    return beta * (t.exp() * (t - m)).sum(-1) + (1 - beta) * (s.exp() * (s - m)).sum(-1)


def check_tokenizers(student: Any, teacher: Any, name: str) -> None:
    """ConfigError unless both tokenizers have one vocabulary and encode ``PROBE`` alike."""
    a, b = student(PROBE)["input_ids"], teacher(PROBE)["input_ids"]
    if student.get_vocab() != teacher.get_vocab() or a != b:
        raise ConfigError(
            f"rl.distill.teacher: {name} has a different tokenizer from the student's (vocabulary "
            f"{len(student)} vs {len(teacher)} tokens, {PROBE[:14]!r}… → {a[:6]} vs {b[:6]}); "
            "on-policy distillation scores the student's token ids, so both must share one tokenizer"
        )


class InProcessTeacher:
    """A teacher model in this process (no gradient), on the student's device."""

    def __init__(self, model: Any, tokenizer: Any, name: str, *, pad_id: int, micro_rows: int = 64) -> None:
        self.model = model.eval().requires_grad_(False)
        self.tokenizer, self.name, self.pad_id, self.micro_rows = tokenizer, name, pad_id, micro_rows

    def check(self, student_tokenizer: Any) -> None:
        check_tokenizers(student_tokenizer, self.tokenizer, self.name)

    @torch.no_grad()
    def logits(self, rows: Sequence[Row]) -> Tensor:
        """(B, L − 1, V) next-token logits of the right-padded rows: index j − 1 predicts token j."""
        device = next(self.model.parameters()).device
        batch = collate(rows, self.pad_id).to(device)
        out = self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
        logits: Tensor = out.logits[:, :-1].float()
        return logits

    @torch.no_grad()
    def logprobs(self, rows: Sequence[Row], temperature: float) -> list[list[float]]:
        """log π_T(ids[j] | ids[:j]) at ``temperature`` from each row's first model token on; 0.0 before
        it (the prompt, which carries no loss).

        It is the student update's shared-prefix forward (``forward_rows``): a group's prompt runs once
        and only the completions are projected to the vocabulary, so scoring G samples of a long
        prompt costs one prompt forward, not G, and no prompt-position logits."""
        out: list[list[float]] = []
        for start in range(0, len(rows), self.micro_rows):
            part = [
                replace(r, logprobs=r.logprobs or [0.0] * len(r.ids))
                for r in rows[start : start + self.micro_rows]
            ]
            fwd = forward_rows(
                self.model, part, self.pad_id, temperature, share_prefix=True, entropy_grad=False
            )
            for i, (r, s) in enumerate(zip(part, fwd.starts, strict=True)):
                out.append([0.0] * s + fwd.logp[i, : len(r.ids) - s].tolist())
        return out

    def aligned_logits(self, rows: Sequence[Row], starts: Sequence[int], width: int) -> Tensor:
        """(B, width, V) teacher logits in a ``Forward``'s layout: position s of row i predicts token
        ``starts[i] + s``, so it is the teacher's index ``starts[i] + s − 1``."""
        full = self.logits(rows)
        out = full.new_zeros((len(rows), width, full.shape[-1]))
        for i, s in enumerate(starts):
            chunk = full[i, s - 1 : s - 1 + width]
            out[i, : chunk.shape[0]] = chunk
        return out


class ServedTeacher:
    """A teacher behind an OpenAI-compatible ``/v1/completions`` that echoes prompt logprobs."""

    def __init__(self, spec: ModelSpec, *, chunk_rows: int = 64) -> None:
        import httpx

        key = api_key_for(spec)
        self.url = spec.base_url[0].rstrip("/")
        self.client = httpx.Client(
            timeout=spec.timeout, headers={"Authorization": f"Bearer {key}"} if key else {}
        )
        self.model = spec.model or self._default_model()
        self.name, self.chunk_rows = spec.describe(), chunk_rows

    def _default_model(self) -> str:
        return str(self._get("/models")["data"][0]["id"])

    def _get(self, path: str) -> Any:
        resp = self.client.get(self.url + path)
        resp.raise_for_status()
        return resp.json()

    def _echo(self, prompt: str | list[list[int]], temperature: float) -> dict[str, Any]:
        body = {"model": self.model, "prompt": prompt, "echo": True, "max_tokens": 0, "logprobs": 0}
        resp = self.client.post(self.url + "/completions", json={**body, "temperature": temperature})
        if resp.status_code != 200:
            raise RuntimeError(
                f"teacher {self.name}: /completions with echo answered {resp.status_code}: {resp.text[:200]}"
            )
        data: dict[str, Any] = resp.json()
        return data

    def check(self, student_tokenizer: Any) -> None:
        ids = self._echo(PROBE, 1.0).get("prompt_token_ids")
        want = student_tokenizer(PROBE)["input_ids"]
        if ids != want:
            raise ConfigError(
                f"rl.distill.teacher: {self.name} has a different tokenizer from the student's "
                f"({PROBE[:14]!r}… → {want[:6]} vs {None if ids is None else ids[:6]}); on-policy "
                "distillation scores the student's token ids, so both must share one tokenizer"
            )

    def logprobs(self, rows: Sequence[Row], temperature: float) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(rows), self.chunk_rows):
            part = rows[start : start + self.chunk_rows]
            data = self._echo([list(r.ids) for r in part], temperature)
            for r, choice in zip(part, sorted(data["choices"], key=lambda c: c["index"]), strict=True):
                values = choice["logprobs"]["token_logprobs"][: len(r.ids)]
                out.append([0.0 if v is None else float(v) for v in values])
        return out


Teacher = InProcessTeacher | ServedTeacher


class Distiller:
    """The teacher term of one run: scores rows before the update and shapes the update's loss."""

    def __init__(self, cfg: TrainConfig, teacher: Teacher) -> None:
        assert cfg.rl.distill is not None
        self.cfg, self.d, self.teacher = cfg, cfg.rl.distill, teacher
        self.temperature = cfg.sampling.temperature
        self.coef_now = 0.0
        self.teacher_s = 0.0  # teacher seconds in the current step's update (the JSD forward)

    @property
    def wants_logits(self) -> bool:
        """Whether the update must keep the student's logits (the JSD term needs whole distributions)."""
        return self.d.divergence == "jsd"

    @classmethod
    def build(cls, cfg: TrainConfig, tokenizer: Any, device: Any, pad_id: int) -> Distiller:
        """Open the teacher ``rl.distill.teacher`` names and check its tokenizer (ConfigError)."""
        d = cfg.rl.distill
        assert d is not None
        spec = d.teacher
        if spec is None or not (spec.served or spec.model):
            raise ConfigError(
                "rl.distill.teacher: name the teacher (a model directory, run directory or catalogue "
                'name, e.g. teacher = "runs/quickstart-train", or [rl.distill.teacher] base_url = URL)'
            )
        teacher: Teacher
        if spec.served:
            teacher = ServedTeacher(spec)
        else:
            from verigym.policies.spec import open_model

            try:
                opened = open_model(spec)
            except (ValueError, OSError) as exc:
                raise ConfigError(f"rl.distill.teacher: {exc}") from None
            policy: Any = opened.policy
            model = policy.model.to(device=device)
            teacher = InProcessTeacher(
                model, policy.tokenizer, str(spec.model), pad_id=pad_id, micro_rows=cfg.rl.micro_batch_rows
            )
        teacher.check(tokenizer)
        return cls(cfg, teacher)

    def prepare(self, rows: list[Row], step: int, student: Any, pad_id: int) -> dict[str, float]:
        """Scale the verified advantage by ``reward_coef``, score ``rows`` with the teacher and put
        c(step) · A^KD_t into ``row.meta["distill_adv"]`` (aligned with ``row.ids``); metrics."""
        self.coef_now = c = distill_coef(self.d, step, self.cfg.rl.steps)
        self.teacher_s = 0.0
        missing = [r for r in rows if r.logprobs is None]
        if missing:  # π_old for the reverse KL: the same no-grad forward the update would run
            _fill_logprobs(student, missing, pad_id, self.temperature, self.cfg.rl.micro_batch_rows, "old")
        for r in rows:
            r.advantage *= self.d.reward_coef
        t0 = time.perf_counter()
        teacher_lp = self.teacher.logprobs(rows, self.temperature)
        spent = time.perf_counter() - t0
        kl_sum = tokens = excluded = 0.0
        for r, t in zip(rows, teacher_lp, strict=True):
            assert r.logprobs is not None
            s_lp = torch.tensor(r.logprobs, dtype=torch.float64)
            mask = torch.tensor(r.mask, dtype=torch.float64)
            adv = reverse_kl_advantages(s_lp, torch.tensor(t, dtype=torch.float64), mask)
            kl_sum -= float(adv.sum())
            tokens += float(mask.sum())
            keep = not (self.d.exclude_passed and r.meta.get("passed", False))
            excluded += not keep
            r.meta["teacher"] = t
            if self.d.divergence == "reverse_kl":
                r.meta["distill_adv"] = (adv * (c if keep else 0.0)).tolist()
            else:
                r.meta["distill_keep"] = keep
        return {
            "distill/coef": c,
            "distill/reverse_kl": kl_sum / max(tokens, 1.0),
            "distill/excluded_frac": excluded / max(len(rows), 1),
            "distill/teacher_s": spent,
        }

    def token_advantages(self, fwd: Forward, rows: Sequence[Row]) -> Tensor:
        """A_t of the module doc in the forward's layout, (B, W); the plain (B,) advantages for JSD."""
        if self.d.divergence != "reverse_kl":
            return fwd.adv
        extra = fwd.align([r.meta.get("distill_adv", [0.0] * len(r.ids)) for r in rows])
        return fwd.adv.unsqueeze(-1) + extra

    def jsd_loss(self, fwd: Forward, rows: Sequence[Row], total_tokens: float) -> tuple[Tensor, float]:
        """c(step) · Σ_t m_t JSD_β,t / N (N: the minibatch's model tokens) and Σ_t m_t JSD_β,t."""
        assert fwd.logits is not None and isinstance(self.teacher, InProcessTeacher)
        t0 = time.perf_counter()
        teacher = self.teacher.aligned_logits(rows, fwd.starts, fwd.logits.shape[1])
        self.teacher_s += time.perf_counter() - t0
        keep = torch.tensor([float(r.meta.get("distill_keep", True)) for r in rows], device=fwd.mask.device)
        m = fwd.mask * keep.unsqueeze(-1)
        jsd = generalized_jsd(fwd.logits, teacher, self.d.beta, self.temperature) * m
        return self.coef_now * jsd.sum() / max(total_tokens, 1.0), float(jsd.detach().sum())
