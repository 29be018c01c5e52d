"""The RL loop: a producer of scored groups and a consumer that updates, joined by a bounded queue.

Producer (``_produce.Producer``): pick tasks from a weighted mix of environments, sample a group
per task with the policy (``LocalPolicy`` micro-batches all of them into one generation pass),
score with each environment's rubric, drop errored samples (never scored 0), apply dynamic
sampling and difficulty filtering. Consumer: grader weights, shaping and advantages
(``_rewards``), then ``num_iterations`` × ``minibatches`` optimizer steps (``_update``), then the
policy version is bumped. Generation of step k+1 waits for the weights of step k (one ticket in
flight): exactly on-policy. The queue and the ticket are the seams where asynchronous off-policy
generation, remote inference servers and several processes plug in without rewriting the loop.

Recipes: GRPO (arXiv:2402.03300), DAPO (arXiv:2503.14476), Dr. GRPO (arXiv:2503.20783), OPO
(arXiv:2505.23585), Skywork-OR1 (arXiv:2505.22312), GRPO-LEAD (arXiv:2504.09696), GSPO
(arXiv:2507.18071), Clip-Cov/KL-Cov (arXiv:2505.22617) — see ``config.PRESETS``. On-policy
distillation (``rl.distill``, ``train.distill``): a teacher scores each batch before the update.
"""

from __future__ import annotations

import asyncio
import copy
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

import torch

from verigym._files import file_op, write_atomic
from verigym.envs.base import Environment
from verigym.policies.local import release_decode_copies
from verigym.runner import tuned_gc
from verigym.train import _malloc
from verigym.train import checkpoint as ckpt
from verigym.train._model import evaluate, load_model
from verigym.train._produce import EnvSlot, Producer
from verigym.train._update import UpdateState, policy_update
from verigym.train.checkpoint import TrainingHalted
from verigym.train.config import ConfigError, EnvConfig, TrainConfig
from verigym.train.distill import Distiller
from verigym.train.group_filters import DifficultyTracker
from verigym.train.losses import AdaptiveEntropy
from verigym.train.monitor import MetricsLog
from verigym.train.optim import make_optimizer, make_scheduler
from verigym.train.rewards import StepBatch, assign_advantages
from verigym.train.rollouts import RolloutSample
from verigym.types import Record, Sampling, Task

if TYPE_CHECKING:
    from verigym.policies.trained import TrainingRecord

__all__ = [
    "RUN_CONFIG",
    "Progress",
    "RLTrainer",
    "TrainerArgs",
    "TrainingHalted",
    "load_envs",
    "make_scheduler",
    "run_config_path",
]

RUN_CONFIG = "train_config.json"
"""The run's config, beside its metrics (not ``config.json``: that name marks a model directory)."""

Progress = Callable[[str, dict[str, Any]], None]
"""``progress(event, info)``: events ``step`` (info: the step's metrics), ``eval``, ``checkpoint``,
``skipped`` (info: ``step``, ``reason``: the step's update was skipped as non-finite)."""


def run_config_path(run_dir: str | Path) -> Path | None:
    """The config file of a train run directory (``train_config.json``; older runs ``config.json``)."""
    for name in (RUN_CONFIG, "config.json"):
        path = Path(run_dir) / name
        if path.is_file():
            return path
    return None


def load_envs(cfg: TrainConfig) -> list[tuple[str, Environment]]:
    """Instantiate every ``[[envs]]`` entry through the registry, with the config's
    ``[[rubric.penalties]]`` and ``[[tools.mcp]]`` added (``verigym.envs.prepare``)."""
    from verigym.envs.prepare import prepare_env
    from verigym.envs.registry import load_env

    out = []
    for e in cfg.envs:
        env = load_env(e.name, **e.args)
        prepare_env(env, cfg.rubric.penalties, cfg.tools.mcp)
        if e.agent is not None or e.agent_cmd is not None:  # the user's own program as the harness
            from verigym.agents import agent_env

            try:
                env = agent_env(env, e.agent, e.agent_cmd, timeout_s=e.agent_timeout_s, on_error=e.on_error)
            except ValueError as exc:
                raise ConfigError(f"envs.{e.name}: {exc}") from None
        out.append((e.name, env))
    return out


def select_tasks(
    tasks: list[Task], env_cfg: EnvConfig | None, name: str, tracker: DifficultyTracker
) -> list[Task]:
    """The training tasks of one env after its ``profile``/``band``/``task_ids`` selection.

    A profile's pass rates seed the tracker, which keeps updating them from the run's own groups.
    """
    if env_cfg is None:
        return tasks
    if env_cfg.profile is not None:
        from verigym.data.difficulty import Profile

        try:
            profile = Profile.load(env_cfg.profile)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"envs.{name}.profile: {exc}") from None
        for task_id, stats in profile.tasks.items():
            if stats.samples:
                tracker.record(f"{name}/{task_id}", stats.pass_rate)
        if env_cfg.band is not None:
            wanted = set(profile.in_band(*env_cfg.band))
            tasks = [t for t in tasks if t.id in wanted]
    if env_cfg.task_ids is not None:
        ids = set(env_cfg.task_ids)
        tasks = [t for t in tasks if t.id in ids]
    if not tasks:
        raise ConfigError(f"envs.{name}: no training task is left after profile/band/task_ids selection")
    return tasks


class TrainerArgs(TypedDict):
    """``RLTrainer``'s keyword arguments after ``cfg`` (its defaults apply), for a subclass that
    takes them and adds its own (``scale.AsyncRLTrainer``)."""

    model: Any
    tokenizer: Any
    envs: NotRequired[Sequence[tuple[str, Environment]] | None]
    out_dir: NotRequired[str | Path | None]
    progress: NotRequired[Progress | None]
    ref: NotRequired[Path | None]


PASS_ROWS = 128
"""Most sequences in one generation pass of the trainer's policy (``LocalPolicy``'s default: 256). A
held-out eval of 400 samples on SmolLM2 took the same 11 s in passes of 128 rows as of 256, and its
peak RSS rose 1.33 GB instead of 1.90 (issue 43 item 2); a step's groups (8 x 8) fit one pass."""


def _hand_back() -> None:
    """Give the heap's free pages back between generation and the update, in a process that trains
    a model above the training kernels' size threshold (``train._malloc``), so that what one phase
    freed does not sit under the other's peak: on SmolLM2 ~300 MB after generation and ~390 MB after
    the update (issue 43 item 2)."""
    if _malloc.tuned():
        _malloc.release()


class RLTrainer:
    """Train ``model`` in place with the config's RL recipe; ``train()`` runs the remaining steps."""

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        model: Any,
        tokenizer: Any,
        envs: Sequence[tuple[str, Environment]] | None = None,
        out_dir: str | Path | None = None,
        progress: Progress | None = None,
        ref: Path | None = None,
    ) -> None:
        from verigym.policies.local import LocalPolicy

        self.cfg = cfg
        aligned(model)  # before anything holds its tensors: a resumed run computes as the first did
        self.model = model
        self.tokenizer = tokenizer
        self.out_dir = Path(out_dir or cfg.out_dir)
        self.progress = progress
        self.policy = LocalPolicy(
            model, tokenizer, name="policy", tool_format=cfg.model.tool_format, max_batch_rows=PASS_ROWS
        )
        self.envs = list(envs) if envs is not None else load_envs(cfg)
        weights = {e.name: e.weight for e in cfg.envs}
        self.tracker = DifficultyTracker(
            cfg.rl.difficulty_low, cfg.rl.difficulty_high, cfg.rl.difficulty_window
        )
        env_cfgs = {e.name: e for e in cfg.envs}
        self.slots = [
            EnvSlot(
                name,
                env,
                weights.get(name, 1.0),
                select_tasks(
                    env.tasks(None, seed=cfg.seed, split="train"), env_cfgs.get(name), name, self.tracker
                ),
            )
            for name, env in self.envs
        ]
        self.producer = Producer(self.slots, self.policy, cfg, self.tracker)
        rl = cfg.rl
        total = rl.steps * rl.num_iterations * rl.minibatches
        optimizer, scheduler = make_optimizer(model.parameters(), rl, total, foreach=True)
        self.state = UpdateState(
            optimizer=optimizer,
            scheduler=scheduler,
            generator=torch.Generator().manual_seed(cfg.seed),
            entropy=AdaptiveEntropy(
                rl.entropy_target, rl.entropy_delta, 0.0, rl.entropy_coef_max, rl.entropy_coef
            )
            if rl.adaptive_entropy
            else None,
        )
        self.ref_model: Any = None
        if ref is not None:  # resumed: the run's own reference, never the resumed weights
            self.ref_model = _load_reference(ref, model)
        elif rl.kl_beta > 0 and cfg.model.lora is None:
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.step = 0
        self.updates = 0  # steps of this process that moved the weights
        self.skipped_in_a_row = 0  # consecutive steps whose update was skipped as non-finite
        self.history: list[dict[str, Any]] = []
        self.pad_id = int(
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        self.distiller: Distiller | None = None
        if rl.distill is not None:
            device = next(model.parameters()).device
            self.distiller = Distiller.build(cfg, tokenizer, device, self.pad_id)
        self.rollouts = RolloutSample(self.out_dir, cfg.logging.rollout_groups, tokenizer=tokenizer)
        self.heldout: dict[str, list[Record]] = {}  # the last held-out eval's records, per environment
        torch.manual_seed(cfg.seed)

    # ---- state -----------------------------------------------------------------------------------

    def trainer_state(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "version": self.policy.version,
            "generator": self.state.generator.get_state(),
            "entropy_c": None if self.state.entropy is None else self.state.entropy.c,
            "last_nll": self.state.last_nll,
            "tracker": self.tracker.state_dict(),
        }

    def save(self) -> Path:
        path = ckpt.save_checkpoint(
            self.out_dir,
            self.step,
            model=self.model,
            tokenizer=self.tokenizer,
            optimizer=self.state.optimizer,
            scheduler=self.state.scheduler,
            trainer_state=self.trainer_state(),
            ref_model=self.ref_model,
            record=self.training_record(),
        )
        return path

    def finish_training(self) -> None:
        """The run's training is over (its checkpoints hold the optimizer for a resume): AdamW's
        moments — twice the trainable weights — are not held through the final eval. A ``train()``
        after this would restart them from zero."""
        self.state.optimizer.state.clear()
        _hand_back()

    def training_record(self, stage: Literal["sft", "rl"] = "rl", step: int | None = None) -> TrainingRecord:
        """What the model's weights are trained with (``train.record``): this run's environments, tool
        format and sampling, at ``step`` (default: the RL step) of ``stage``."""
        from verigym.train.record import training_record

        step = self.step if step is None else step
        return training_record(self.cfg, self.envs, self.policy.tool_format, stage=stage, step=step)

    @classmethod
    def resume(
        cls, run_dir: str | Path, *, progress: Progress | None = None, steps: int | None = None
    ) -> RLTrainer:
        """Continue a run from its newest checkpoint (``steps`` may raise the step budget)."""
        run = Path(run_dir)
        cfg_file = run_config_path(run)
        if cfg_file is None:
            raise FileNotFoundError(f"{run}: no {RUN_CONFIG}; is this a verigym train run directory?")
        file_op("read", cfg_file)
        cfg = TrainConfig.model_validate_json(cfg_file.read_text())
        if steps is not None:
            cfg.rl.steps = steps
        latest = ckpt.latest_checkpoint(run)
        if latest is None:
            raise FileNotFoundError(f"{run}: no checkpoint to resume from")
        ref = _reference_dir(cfg, latest)
        file_op("read", latest / "model")
        model, tokenizer = load_model(cfg.model, weights=latest / "model")
        trainer = cls(cfg, model=model, tokenizer=tokenizer, out_dir=run, progress=progress, ref=ref)
        payload = ckpt.load_checkpoint(latest)
        trainer.state.optimizer.load_state_dict(payload["optimizer"])
        trainer.state.scheduler.load_state_dict(payload["scheduler"])
        ts = payload["trainer"]
        trainer.step = int(ts["step"])
        trainer.policy.version = int(ts["version"])
        trainer.state.generator.set_state(ts["generator"])
        if trainer.state.entropy is not None and ts["entropy_c"] is not None:
            trainer.state.entropy.c = float(ts["entropy_c"])
        trainer.state.last_nll = float(ts["last_nll"])
        trainer.tracker.load_state_dict(ts["tracker"])
        ckpt.set_rng_state(payload["rng"])
        return trainer

    # ---- evaluation ------------------------------------------------------------------------------

    async def evaluate_async(self, *, greedy: bool = False) -> dict[str, Any]:
        """Held-out pass@1 over every environment's test split (the mean over environments with a
        scored sample; None when none was scored), and per environment (with each grader's mean,
        ``eval/ENV/grader/NAME``). ``greedy``: one greedy sample a task, whatever ``[eval]`` samples.
        ``eval/errors`` of ``eval/samples`` errored, the first one's reason in ``eval/first_error``."""
        e = self.cfg.eval
        if greedy:
            e = e.model_copy(update={"temperature": 0.0, "samples": 1})
        sampling = Sampling(
            temperature=e.temperature, top_p=1.0, max_tokens=self.cfg.sampling.max_tokens, seed=self.cfg.seed
        )
        out: dict[str, Any] = {}
        scores = []
        errors = samples = 0.0
        first_error: str | None = None
        self.heldout = {}
        for name, env in self.envs:
            tasks = env.tasks(e.tasks, seed=self.cfg.seed, split="test")
            kept: list[Record] = []
            res = await evaluate(
                env, self.policy, tasks, sampling=sampling, samples=e.samples, env_name=name, keep=kept
            )
            self.heldout[name] = kept
            out[f"eval/{name}/pass_at_1"] = res["pass_at_1"]
            out[f"eval/{name}/errors"] = res["errors"]
            out.update({f"eval/{name}/{k}": v for k, v in res.items() if k.startswith("grader/")})
            if res["pass_at_1"] is not None:
                scores.append(res["pass_at_1"])
            errors += res["errors"]
            samples += res["samples"]
            first_error = first_error or res.get("first_error")
        out["eval/pass_at_1"] = sum(scores) / len(scores) if scores else None
        out["eval/errors"], out["eval/samples"] = errors, samples
        if first_error is not None:
            out["eval/first_error"] = first_error
        return out

    def evaluate(self, *, greedy: bool = False) -> dict[str, Any]:
        return asyncio.run(self.evaluate_async(greedy=greedy))

    # ---- the loop ----------------------------------------------------------------------------------

    def consume(self, batch: StepBatch) -> dict[str, Any]:
        """Advantages + update for one batch; returns the step's metrics."""
        t0 = time.perf_counter()
        # the decode path's weight copies go stale with this step: not held through the rollout
        # sample's forward and the update (~365 MB of a SmolLM2 process's peak, issue 43 item 2)
        release_decode_copies(self.model)
        _hand_back()
        rows, reward_metrics = assign_advantages(batch, self.cfg, generator=self.state.generator)
        metrics: dict[str, Any] = {"step": batch.step, "phase": "rl", "policy_version": self.policy.version}
        metrics.update(batch.stats)
        metrics.update(reward_metrics)
        bad = [r for r in rows if not math.isfinite(r.advantage)]
        if bad:  # a reward that overflowed after weighting or shaping: never trained on
            rows = [r for r in rows if math.isfinite(r.advantage)]
            metrics["rows_nonfinite_advantage"] = float(len(bad))
            if not rows:
                metrics["skip_reason"] = f"non-finite advantage on all {len(bad)} rows"
        if rows:  # a bounded sample of the step's groups for `verigym view` (train.rollouts)
            self.rollouts.write(
                batch,
                self.model,
                pad_id=self.pad_id,
                temperature=self.cfg.sampling.temperature,
                micro=self.cfg.rl.micro_batch_rows,
                version=self.policy.version,
            )
        if rows and self.distiller is not None:
            metrics.update(self.distiller.prepare(rows, batch.step, self.model, self.pad_id))
        if rows:
            metrics.update(
                policy_update(
                    self.model,
                    rows,
                    self.cfg.rl,
                    self.state,
                    pad_id=self.pad_id,
                    temperature=self.cfg.sampling.temperature,
                    max_len=self.cfg.sampling.max_tokens,
                    ref_model=self.ref_model,
                    micro_rows=self.cfg.rl.micro_batch_rows,
                    share_prefix=self.cfg.rl.share_prefix,
                    distill=self.distiller,
                )
            )
            if self.distiller is not None:
                metrics["distill/teacher_s"] += self.distiller.teacher_s
            if metrics["optimizer_steps"]:  # every step skipped (non-finite): the weights did not move
                self.policy.version += 1
            _hand_back()
        completion_tokens = sum(s.length for g in batch.groups for s in g.samples)
        versions = [
            c.policy_version
            for g in batch.groups
            for s in g.samples
            for c in s.scored.trajectory.completions
            if c.policy_version is not None
        ]
        metrics["staleness"] = float(metrics["policy_version"] - min(versions)) if versions else 0.0
        metrics["update_time_s"] = time.perf_counter() - t0
        metrics["step_time_s"] = metrics["update_time_s"] + float(batch.stats.get("gen_time_s", 0.0))
        metrics["tokens_per_s"] = completion_tokens / max(metrics["step_time_s"], 1e-9)
        # per-task history for `verigym select-tasks --by variance` (1-shot RLVR)
        metrics["task_pass_rates"] = dict(batch.task_pass_rates)
        return metrics

    async def run_async(self) -> list[dict[str, Any]]:
        cfg = self.cfg
        log = self.open_log()
        queue: asyncio.Queue[StepBatch | None] = asyncio.Queue(maxsize=cfg.rl.queue_size)
        tickets = asyncio.Semaphore(1)  # max lag 0: generation of step k+1 waits for step k's weights
        start = self.step

        async def produce() -> None:
            for step in range(start, cfg.rl.steps):
                await tickets.acquire()
                await queue.put(await self.producer.produce(step))
            await queue.put(None)

        async def consume() -> None:
            while (batch := await queue.get()) is not None:
                metrics = self.consume(batch)
                self.step = batch.step + 1
                await self.finish_step(metrics, log)
                tickets.release()

        producer = asyncio.create_task(produce())
        # The model, tokenizer and imports are long-lived: frozen out of the cyclic GC, whose full
        # collections otherwise rescan them every few steps (~0.4 s each with transformers loaded).
        with tuned_gc():
            try:
                await consume()
                await producer
            finally:
                producer.cancel()
                log.close()
        return self.history

    def open_log(self) -> MetricsLog:
        """Write the run's config to ``out_dir`` and open its metrics log, dropping the rows of steps
        after the one this run resumes from (where both ``run_async`` loops start)."""
        cfg = self.cfg
        self.out_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.out_dir / RUN_CONFIG, cfg.model_dump_json(indent=2))  # unchanged: not rewritten
        log = MetricsLog(
            self.out_dir / "metrics.jsonl", tensorboard=cfg.logging.tensorboard, wandb=cfg.logging.wandb
        )
        log.truncate_after(self.step - 1)
        self.rollouts.truncate_after(self.step - 1)
        return log

    async def finish_step(self, metrics: dict[str, Any], log: MetricsLog) -> None:
        """After step ``self.step``'s update: held-out eval when due, log, progress, checkpoint."""
        cfg = self.cfg
        every = cfg.rl.eval_every
        if every and (self.step % every == 0 or self.step == cfg.rl.steps):
            metrics.update(await self.evaluate_async())
            self.rollouts.write_heldout(int(metrics["step"]), self.heldout)
            self._emit("eval", metrics)
        updated = bool(metrics.get("optimizer_steps"))
        self.updates += updated
        skipped = not updated and "skip_reason" in metrics
        self.skipped_in_a_row = self.skipped_in_a_row + 1 if skipped else 0
        log.log(metrics)
        self.history.append(metrics)
        self._emit("step", metrics)
        if skipped:
            self._emit("skipped", {"step": self.step, "reason": metrics["skip_reason"]})
        if self.skipped_in_a_row >= cfg.rl.max_skipped_steps:
            raise TrainingHalted(
                f"rl: {self.skipped_in_a_row} steps in a row skipped (step {self.step}: "
                f"{metrics['skip_reason']}); the run stops (rl.max_skipped_steps = "
                f"{cfg.rl.max_skipped_steps}): lower rl.lr or check the rewards"
            )
        ce = cfg.logging.checkpoint_every
        if (ce and self.step % ce == 0) or self.step == cfg.rl.steps:
            self._emit("checkpoint", {"path": str(self.save()), "step": self.step})

    def train(self) -> list[dict[str, Any]]:
        """Run the remaining steps; returns this call's step metrics."""
        return asyncio.run(self.run_async())

    def _emit(self, event: str, info: dict[str, Any]) -> None:
        if self.progress is not None:
            self.progress(event, info)


def _reference_dir(cfg: TrainConfig, latest: Path) -> Path | None:
    """The frozen KL reference a resumed run needs (full fine-tuning with ``rl.kl_beta > 0``; LoRA's is
    the base model with the adapter off), or None. Its absence is one line: taking the resumed weights
    as the reference would change the run silently."""
    if not (cfg.rl.kl_beta > 0 and cfg.model.lora is None):
        return None
    for ref in (latest.parent / ckpt.REF_DIR, latest / ckpt.REF_DIR):  # older runs: one per checkpoint
        if ref.is_dir():
            return ref
    raise TrainingHalted(
        f"--resume {latest.parent.parent}: the KL reference model ({latest.parent / ckpt.REF_DIR}) is "
        "missing, and the resumed weights are not the reference the run started with; start the run "
        "again (or set rl.kl_beta = 0 in a new run)"
    )


def _load_reference(ref: Path, model: Any) -> Any:
    """The reference saved in ``ref``, frozen, on ``model``'s device and in its dtype."""
    from transformers import AutoModelForCausalLM

    file_op("read", ref)
    param = next(model.parameters())
    loaded = AutoModelForCausalLM.from_pretrained(str(ref), dtype=param.dtype)
    return aligned(loaded.to(param.device)).eval().requires_grad_(False)


def aligned(model: Any) -> Any:
    """``model`` with every CPU parameter and buffer in its own 64-byte-aligned storage (returned).

    Weights read from safetensors sit at the file's offsets (24 bytes past a 64-byte boundary here), and
    MKL's float32 products take other code paths on unaligned data, rounding in the last bits
    differently for some shapes: a resumed run (weights read from its checkpoint) drifted from the
    uninterrupted one (weights created or read elsewhere) at the first such shape. Tied tensors stay tied.
    """
    copies: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        for t in [*model.parameters(), *model.buffers()]:
            if t.device.type != "cpu" or t.data_ptr() % 64 == 0:
                continue
            key = t.data_ptr()
            if key not in copies:
                copies[key] = t.data.clone(memory_format=torch.contiguous_format)
            t.data = copies[key]
    return model
