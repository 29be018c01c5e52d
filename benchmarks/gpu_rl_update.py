"""verigym's RL update on a GPU in bf16, against TRL's GRPOTrainer loss on the same card (issue 43 item 6).

One run, one process: (a) the card's ceilings measured here and now: bf16 matrix products at a large
square shape and at the model's own shapes ([tokens × 576] @ [576 × 1536], [tokens × 1536] @ [1536 × 576],
the lm head [tokens × 576] @ [576 × 49152]) and memory bandwidth from a large device-to-device copy
(bytes read + written); (b) verigym's update as the trainer calls it (``policy_update`` with the
real-model recipe's DAPO settings, ``quickstart_real``: packing, shared prompts, AdamW foreach) on
synthetic groups; (c) TRL's: ``GRPOTrainer.compute_loss`` on the same rows as its prepared inputs,
then ``accelerator.backward``, gradient clipping, its own optimizer's step: what ``Trainer`` does per
step once generation is done (generation, rewards and the dataloader are not timed on either side).
TRL runs twice: ``trl`` without gradient checkpointing (like for like) and ``trl-gc`` with it on
(GRPOConfig's default). The sides alternate over ``--rounds`` rounds, first side rotating.

Model: SmolLM2-135M-Instruct's config (``--model-dir``: a folder with its config.json and tokenizer
files) with random weights (seeded), bf16 weights and optimizer states on both sides, sdpa attention.
Data: ``groups × group_size`` rows; a prompt is the recipe's arithmetic question in the model's chat
template (52 tokens), each completion seeded random ids of a seeded length ending with EOS; rewards
seeded 0/1 with both values in every group, group-normalised advantages. Shapes: ``recipe`` (8 × 8,
≤ 16 new tokens, pack_tokens 512, the recipe's own) and ``long`` (8 × 8, 256–512 new tokens,
pack_tokens 8192).

FLOPs: 6·params·tokens for forward + backward: the body's non-embedding parameters × every row's
prompt and completion tokens (run once each, unshared, unpadded) plus the tied lm head's parameters ×
the scored tokens; attention's score FLOPs left out. This "useful" count is the same numerator for
every side; verigym's executed count (shared prompts) and TRL's (padded rows) are printed beside it.

``--verigym-set rl__packing=false`` changes verigym's recipe settings; ``--profile`` prints torch.profiler
tables of verigym's update instead of the comparison. Figures: ``benchmarks/RESULTS.md``, "RL update
on a GPU". Needs TRL (and datasets) importable for the TRL sides; a side that fails is reported, not fatal.

    python benchmarks/gpu_rl_update.py --device cpu --tiny          # smoke test, seconds
    python benchmarks/gpu_rl_update.py --model-dir DIR --out $OUT   # on the GPU
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

SIDES = ("verigym", "trl", "trl-gc")
SHAPES: dict[str, dict[str, int]] = {
    "recipe": {"groups": 8, "group_size": 8, "min_new": 4, "max_new": 16, "pack_tokens": 512},
    "long": {"groups": 8, "group_size": 8, "min_new": 256, "max_new": 512, "pack_tokens": 8192},
}
TINY: dict[str, dict[str, int]] = {
    "recipe": {"groups": 2, "group_size": 4, "min_new": 2, "max_new": 8, "pack_tokens": 64},
    "long": {"groups": 2, "group_size": 4, "min_new": 16, "max_new": 32, "pack_tokens": 256},
}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench(fn: Callable[[], Any], device: torch.device, reps: int, warmup: int = 2) -> list[float]:
    """Seconds of each of ``reps`` calls after ``warmup`` (CUDA events on a GPU, else a host clock)."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            out.append(a.elapsed_time(b) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return out


def ceilings(device: torch.device, tiny: bool, hidden: int, inter: int, vocab: int) -> dict[str, Any]:
    """bf16 matmul TFLOP/s (large square, model shapes at several token counts) and copy GB/s."""
    gen = torch.Generator(device=device).manual_seed(1)
    res: dict[str, Any] = {"matmul": {}}

    def mm(m: int, k: int, n: int) -> float:
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16, generator=gen)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16, generator=gen)
        t = statistics.median(bench(lambda: a @ b, device, 5 if tiny else 30, 3))
        return 2 * m * k * n / t / 1e12

    big = 256 if tiny else 8192
    res["matmul"][f"square {big}"] = mm(big, big, big)
    for tokens in (64,) if tiny else (512, 1024, 8192, 32768):
        res["matmul"][f"{tokens}x{hidden} @ {hidden}x{inter}"] = mm(tokens, hidden, inter)
        res["matmul"][f"{tokens}x{inter} @ {inter}x{hidden}"] = mm(tokens, inter, hidden)
        res["matmul"][f"{tokens}x{hidden} @ {hidden}x{vocab} (lm head)"] = mm(tokens, hidden, vocab)
    n = (16 if tiny else 2048) * 2**20  # bytes per buffer
    src = torch.empty(n, dtype=torch.uint8, device=device).random_(generator=gen)
    dst = torch.empty_like(src)
    t = statistics.median(bench(lambda: dst.copy_(src), device, 5 if tiny else 20, 3))
    res["copy_GBps"] = 2 * n / t / 1e9
    res["copy_bytes"] = n
    return res


def build_model(model_dir: Path, tiny: bool, device: torch.device, dtype: torch.dtype, seed: int) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(model_dir)
    if tiny:
        cfg.update(dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4))
        cfg.update(dict(num_key_value_heads=2, head_dim=16))
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=dtype)
    return model.to(device=device, dtype=dtype)


def make_rows(tok: Any, shape: dict[str, int], seed: int, vocab: int) -> list[Any]:
    """Synthetic groups as verigym ``Row``s (logprobs None: ``fill_old_logprobs`` sets π_old)."""
    from verigym.train.samples import Row

    rng = random.Random(seed)
    eos = int(tok.eos_token_id)
    rows = []
    for _ in range(shape["groups"]):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        text = f"Compute {a} + {b}. Give the final answer as an integer in \\boxed{{}}."
        enc = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        prompt = list(enc["input_ids"] if hasattr(enc, "keys") else enc)
        rewards = [rng.randint(0, 1) for _ in range(shape["group_size"])]
        rewards[0] = 1 - rewards[1] if len(set(rewards)) == 1 else rewards[0]  # a mixed group
        r = torch.tensor(rewards, dtype=torch.float32)
        adv = ((r - r.mean()) / (r.std() + 1e-6)).tolist()
        for i in range(shape["group_size"]):
            n = rng.randint(shape["min_new"], shape["max_new"])
            comp = [rng.randrange(100, vocab) for _ in range(n - 1)] + [eos]
            rows.append(
                Row(ids=prompt + comp, mask=[0] * len(prompt) + [1] * n, logprobs=None, advantage=adv[i])
            )
    return rows


def trl_inputs(rows: list[Any], pad: int, device: torch.device) -> dict[str, Any]:
    """The rows as ``GRPOTrainer._generate_and_score_completions`` returns them (left-padded prompts,
    right-padded completions, advantages, the completion-token count for DAPO's normaliser)."""
    starts = [r.mask.index(1) for r in rows]
    lp, lc = max(starts), max(len(r.ids) - s for r, s in zip(rows, starts, strict=True))
    pids, pm, cids, cm = [], [], [], []
    for r, s in zip(rows, starts, strict=True):
        p, c = r.ids[:s], r.ids[s:]
        pids.append([pad] * (lp - len(p)) + p)
        pm.append([0] * (lp - len(p)) + [1] * len(p))
        cids.append(c + [pad] * (lc - len(c)))
        cm.append([1] * len(c) + [0] * (lc - len(c)))
    t = lambda x: torch.tensor(x, dtype=torch.long, device=device)  # noqa: E731
    cmask = t(cm)
    return {
        "prompt_ids": t(pids),
        "prompt_mask": t(pm),
        "completion_ids": t(cids),
        "completion_mask": cmask,
        "advantages": torch.tensor([r.advantage for r in rows], dtype=torch.float32, device=device),
        "num_items_in_batch": cmask.sum(),
    }


class Phases:
    """Seconds per phase from wrappers that synchronise around the wrapped call."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.t = device, {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}

    def wrap(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        def inner(*a: Any, **k: Any) -> Any:
            sync(self.device)
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                sync(self.device)
                self.t[name] += time.perf_counter() - t0

        return inner


@contextlib.contextmanager
def patched(patches: list[tuple[Any, str, Callable[..., Any]]]) -> Iterator[None]:
    saved = [(o, a, getattr(o, a)) for o, a, _ in patches]
    for o, a, f in patches:
        setattr(o, a, f)
    try:
        yield
    finally:
        for o, a, f in reversed(saved):
            setattr(o, a, f)


@torch.no_grad()
def fill_old_logprobs(model: Any, rows: list[Any], pad: int) -> None:
    """pi_old for the rows (the sampling logprobs a policy returns), untimed. ``policy_update`` would fill
    them itself, but its ``_fill_logprobs`` leaves the batch on the CPU (fails with a CUDA model)."""
    from verigym.train._forward import forward_logprobs
    from verigym.train.samples import collate

    device = next(model.parameters()).device
    for i in range(0, len(rows), 16):
        part = rows[i : i + 16]
        logp, _ = forward_logprobs(model, collate(part, pad).to(device), 1.0)
        for j, r in enumerate(part):
            r.logprobs = [0.0, *logp[j, : len(r.ids) - 1].float().tolist()]


def verigym_side(
    model: Any, rows: list[Any], shape: dict[str, int], pad: int, seed: int, extra: dict[str, Any]
) -> dict[str, Any]:
    from verigym.recipes.quickstart_real import real_quickstart_config
    from verigym.train import _update, packing
    from verigym.train._update import UpdateState, policy_update
    from verigym.train.optim import make_optimizer

    sets = {"sampling__max_tokens": shape["max_new"], "rl__pack_tokens": shape["pack_tokens"], **extra}
    rl = real_quickstart_config(tempfile.mkdtemp(), model="x", seed=seed, **sets).rl
    opt, sched = make_optimizer(model.parameters(), rl, 10_000, foreach=True)
    state = UpdateState(optimizer=opt, scheduler=sched, generator=torch.Generator().manual_seed(seed))
    fill_old_logprobs(model, rows, pad)

    def step() -> None:
        policy_update(model, rows, rl, state, pad_id=pad, temperature=1.0, max_len=shape["max_new"],
                      micro_rows=rl.micro_batch_rows, share_prefix=rl.share_prefix)  # fmt: skip

    def patches(ph: Phases) -> list[tuple[Any, str, Callable[..., Any]]]:
        return [(packing, "forward_packed", ph.wrap(packing.forward_packed, "forward")),
                (_update, "forward_rows", ph.wrap(_update.forward_rows, "forward")),
                (torch.autograd, "backward", ph.wrap(torch.autograd.backward, "backward")),
                (opt, "step", ph.wrap(opt.step, "optimizer"))]  # fmt: skip

    micros = packing.plan_micro_batches(rows, packing.row_starts(rows), share_prefix=True,
                                        budget=rl.pack_tokens, at_least=rl.grad_accum)  # fmt: skip
    body = head = 0
    for m in micros:
        part = [rows[i] for i in m]
        p = packing.pack_rows(part, packing.row_starts(part), share_prefix=True, build_mask=False)
        body, head = body + p.ids.shape[1], head + p.keep.numel()
    if not rl.packing:  # one padded micro-batch (<= micro_batch_rows rows): prompts once, tails padded
        starts = packing.row_starts(rows)
        prompts = {tuple(r.ids[:s]) for r, s in zip(rows, starts, strict=True)}
        width = max(len(r.ids) - s for r, s in zip(rows, starts, strict=True))
        head, micros = len(prompts) + len(rows) * width, [list(range(len(rows)))]
        body = len(prompts) * max(map(len, prompts)) + len(rows) * width
    info = {"optimizer": f"AdamW foreach (verigym make_optimizer), lr {rl.lr}", "micro_batches": len(micros)}
    return {"step": step, "patches": patches, "tokens": (body, head, 0), "info": info}


def trl_side(model: Any, tok: Any, rows: list[Any], shape: dict[str, int], args: argparse.Namespace,
             gc: bool) -> dict[str, Any]:  # fmt: skip
    from datasets import Dataset
    from datasets.table import InMemoryTable
    from trl import GRPOConfig, GRPOTrainer

    n = shape["groups"] * shape["group_size"]
    cfg = GRPOConfig(
        output_dir=tempfile.mkdtemp(), seed=args.seed, use_cpu=args.device == "cpu",
        bf16=args.device != "cpu", gradient_checkpointing=gc, per_device_train_batch_size=n,
        gradient_accumulation_steps=1, num_generations=shape["group_size"], num_iterations=1,
        max_completion_length=shape["max_new"], temperature=1.0, beta=0.0, loss_type="dapo",
        epsilon=0.2, epsilon_high=0.28, scale_rewards="group", learning_rate=1e-5,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
        logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True, dataloader_num_workers=0,
    )  # fmt: skip

    def reward(completions: list[Any], **_: Any) -> list[float]:
        return [0.0] * len(completions)

    # never read (no generation); a fixed fingerprint skips hashing the table (which fails on some pyarrow)
    data = Dataset(InMemoryTable.from_pydict({"prompt": ["x"] * n}), fingerprint="gpu_rl_update")
    tr = GRPOTrainer(model=model, reward_funcs=reward, args=cfg, train_dataset=data, processing_class=tok)
    if gc:  # Trainer.train() switches checkpointing on, and this harness does not call train()
        kw = dict(getattr(cfg, "activation_checkpointing_kwargs", None) or {})
        tr.model.activation_checkpointing_enable(activation_checkpointing_kwargs=kw or None)
    tr.create_optimizer_and_scheduler(num_training_steps=10_000)
    tr.current_gradient_accumulation_steps = 1
    tr.model.train()
    inputs = trl_inputs(rows, int(tok.pad_token_id), next(tr.model.parameters()).device)
    opt = tr.optimizer

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = tr.compute_loss(tr.model, inputs)
        tr.accelerator.backward(loss)
        tr.accelerator.clip_grad_norm_(tr.model.parameters(), cfg.max_grad_norm)
        opt.step()
        tr.lr_scheduler.step()

    def patches(ph: Phases) -> list[tuple[Any, str, Callable[..., Any]]]:
        fwd = tr._get_per_token_logps_and_entropies
        return [(tr, "_get_per_token_logps_and_entropies", ph.wrap(fwd, "forward")),
                (torch.autograd, "backward", ph.wrap(torch.autograd.backward, "backward")),
                (opt, "step", ph.wrap(opt.step, "optimizer"))]  # fmt: skip

    b, w = inputs["completion_ids"].shape
    body = b * (inputs["prompt_ids"].shape[1] + w)  # padded rows; the fused head scores real tokens only
    head = int(inputs["completion_mask"].sum())
    o = getattr(opt, "optimizer", opt)
    info = {"optimizer": f"{type(o).__name__} fused={o.defaults.get('fused')} foreach={o.defaults.get('foreach')}",
            "gradient_checkpointing": gc}  # fmt: skip
    return {"step": step, "patches": patches, "tokens": (body, head, body if gc else 0), "info": info}


def run_shape(name: str, shape: dict[str, int], base: Any, tok: Any, args: argparse.Namespace,
              device: torch.device) -> dict[str, Any]:  # fmt: skip
    vocab, hidden = base.config.vocab_size, base.config.hidden_size
    n_all = sum(p.numel() for p in base.parameters())
    p_head = vocab * hidden
    p_body = n_all - p_head
    rows = make_rows(tok, shape, args.seed, vocab)
    pad = int(tok.pad_token_id)
    seq_tokens = sum(len(r.ids) for r in rows)
    new_tokens = sum(r.model_tokens for r in rows)
    useful = 6 * (p_body * seq_tokens + p_head * new_tokens)
    out: dict[str, Any] = {"shape": shape, "rows": len(rows), "seq_tokens": seq_tokens, "new_tokens": new_tokens,
                           "useful_flop": useful, "params": n_all, "sides": {}}  # fmt: skip
    sides: dict[str, dict[str, Any]] = {}

    def guarded(side: str, fn: Callable[[str], None]) -> None:
        """Run ``fn``; a side that fails (say, out of memory) is dropped, the others' figures kept."""
        try:
            fn(side)
        except Exception as e:
            sides.pop(side, None)
            out["sides"][side] = {"error": f"{type(e).__name__}: {e}"[:500]}
            print(f"[{name}] {side} failed: {type(e).__name__}: {e}", flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()

    def setup(side: str) -> None:
        model = copy.deepcopy(base)
        sides[side] = (verigym_side(model, rows, shape, pad, args.seed, args.verigym_set) if side == "verigym"
                       else trl_side(model, tok, rows, shape, args, gc=side == "trl-gc"))  # fmt: skip
        sides[side]["step"]()  # warm-up (and, on verigym's side, pi_old for the rows)

    def timed(side: str) -> None:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        times = bench(sides[side]["step"], device, args.reps, warmup=1)
        rec = out["sides"].setdefault(side, {"rounds": [], "times": []})
        rec["rounds"].append(statistics.median(times))
        rec["times"].extend(times)
        if device.type == "cuda":
            mem = torch.cuda.max_memory_allocated(device) / 2**30
            rec["peak_mem_GiB"] = max(rec.get("peak_mem_GiB", 0.0), mem)

    def phased(side: str) -> None:
        s, ph = sides[side], Phases(device)
        with patched(s["patches"](ph)):
            t0 = time.perf_counter()
            for _ in range(args.reps):
                s["step"]()
            sync(device)
        total = (time.perf_counter() - t0) / args.reps
        phases = {k: v / args.reps for k, v in ph.t.items()}
        phases["other"] = total - sum(phases.values())
        body, head, again = s["tokens"]  # again: tokens whose layers' forward checkpointing re-runs
        rec = out["sides"][side]
        med = statistics.median(rec["times"])
        flop = 6 * (p_body * body + p_head * head) + 2 * p_body * again
        rec.update(s["info"], median_s=med, phases_s=phases, instrumented_total_s=total,
                   executed_flop=flop, body_tokens=body, head_tokens=head)  # fmt: skip
        rec["useful_TFLOPs"] = useful / med / 1e12
        rec["executed_TFLOPs"] = flop / med / 1e12

    for side in args.sides:
        guarded(side, setup)
    for r in range(args.rounds):
        live = [s for s in args.sides if s in sides]
        for side in live[r % len(live) :] + live[: r % len(live)] if live else []:
            guarded(side, timed)
    for side in list(sides):
        guarded(side, phased)
    return out


def profile(args: argparse.Namespace, base: Any, tok: Any, device: torch.device) -> None:
    """The ops that take verigym's update time (torch.profiler over 2 updates after a warm-up)."""
    from torch.profiler import ProfilerActivity

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    for name in args.shapes.split(","):
        shape = (TINY if args.tiny else SHAPES)[name]
        rows = make_rows(tok, shape, args.seed, base.config.vocab_size)
        side = verigym_side(
            copy.deepcopy(base), rows, shape, int(tok.pad_token_id), args.seed, args.verigym_set
        )
        side["step"]()
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(2):
                side["step"]()
            sync(device)
        for key in (
            ("self_cuda_time_total", "self_cpu_time_total")
            if device.type == "cuda"
            else ("self_cpu_time_total",)
        ):
            table = prof.key_averages().table(sort_by=key, row_limit=18, max_name_column_width=60)
            print(f"\n[{name}] verigym, 2 updates, by {key}\n{table}", flush=True)
            (args.out / f"profile_{name}_{key.split('_')[1]}.txt").write_text(table)


def versions(device: torch.device) -> dict[str, Any]:
    import transformers

    v: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
    }
    with contextlib.suppress(Exception):
        import trl

        v["trl"] = trl.__version__
    if device.type == "cuda":
        v["gpu"] = torch.cuda.get_device_name(device)
        q = [
            "nvidia-smi",
            "--query-gpu=driver_version,clocks.sm,clocks.max.sm,power.limit",
            "--format=csv,noheader",
        ]
        with contextlib.suppress(Exception):
            v["nvidia_smi"] = subprocess.run(q, capture_output=True, text=True, timeout=20).stdout.strip()
    return v


def report(res: dict[str, Any]) -> None:
    peak = max(res["ceilings"]["matmul"].values())
    print(f"\n{res['versions']}  seed {res['seed']}")
    print(f"copy {res['ceilings']['copy_GBps']:.0f} GB/s; bf16 matmul TFLOP/s:")
    for k, v in res["ceilings"]["matmul"].items():
        print(f"  {k:<40} {v:8.1f}")
    for name, sh in res["shapes"].items():
        print(f"\n[{name}] {sh['rows']} rows, {sh['seq_tokens']} tokens ({sh['new_tokens']} new), "
              f"useful {sh['useful_flop'] / 1e12:.3f} TFLOP per update")  # fmt: skip
        print(
            "| side | median ms | rounds ms | fwd / bwd / opt / other ms | useful TFLOP/s (% peak) | executed TFLOP/s | mem GiB |"
        )
        print("|---|---|---|---|---|---|---|")
        for side, s in sh["sides"].items():
            if "error" in s:
                print(f"| {side} | failed: {s['error'][:80]} |")
                continue
            ph = " / ".join(
                f"{1e3 * s['phases_s'][k]:.1f}" for k in ("forward", "backward", "optimizer", "other")
            )
            rounds = ", ".join(f"{1e3 * t:.1f}" for t in s["rounds"])
            print(f"| {side} | {1e3 * s['median_s']:.1f} | {rounds} | {ph} | {s['useful_TFLOPs']:.1f} "
                  f"({100 * s['useful_TFLOPs'] / peak:.1f}%) | {s['executed_TFLOPs']:.1f} | {s.get('peak_mem_GiB', 0):.1f} |")  # fmt: skip
        v = sh["sides"].get("verigym", {})
        for other in ("trl", "trl-gc"):
            o = sh["sides"].get(other, {})
            if "median_s" in v and "median_s" in o:
                per = [b / a for a, b in zip(v["rounds"], o["rounds"], strict=False)]
                print(
                    f"{other} / verigym: {o['median_s'] / v['median_s']:.2f}x (per round {', '.join(f'{x:.2f}' for x in per)})"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda or cpu")
    ap.add_argument(
        "--tiny", action="store_true", help="a 2-layer model, small shapes and ceilings (smoke test)"
    )
    default_dir = Path.home() / ".cache" / "verigym" / "models" / "smollm2-135m-instruct"
    ap.add_argument(
        "--model-dir", type=Path, default=default_dir, help="config.json + tokenizer (weights unused)"
    )
    ap.add_argument("--shapes", default="recipe,long", help=f"comma-separated of {sorted(SHAPES)}")
    ap.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated of {SIDES}")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, sides alternating (first side rotates)")
    ap.add_argument("--reps", type=int, default=5, help="timed updates per side per round")
    ap.add_argument(
        "--verigym-set",
        action="append",
        default=[],
        help="recipe override for verigym's side, rl__packing=false",
    )
    ap.add_argument(
        "--profile", action="store_true", help="torch.profiler tables of verigym's update, per shape"
    )
    ap.add_argument("--seed", type=int, default=0, help="weights, prompts, completions, rewards")
    ap.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", "runs/gpu_rl_update")), help="JSON folder"
    )
    args = ap.parse_args()
    args.sides = [s for s in args.sides.split(",") if s]
    args.verigym_set = {k: json.loads(v) for k, _, v in (x.partition("=") for x in args.verigym_set)}
    device = torch.device(args.device)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model_dir)
    base = build_model(args.model_dir, args.tiny, device, torch.bfloat16, args.seed)
    c = base.config
    res: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "seed": args.seed, "tiny": args.tiny,
                           "versions": versions(device), "args": {k: str(v) for k, v in vars(args).items()}}  # fmt: skip
    print(res["versions"], flush=True)
    t0 = time.perf_counter()
    res["ceilings"] = ceilings(device, args.tiny, c.hidden_size, c.intermediate_size, c.vocab_size)
    print(f"ceilings {time.perf_counter() - t0:.1f} s", flush=True)
    res["shapes"] = {}
    args.out.mkdir(parents=True, exist_ok=True)
    if args.profile:
        profile(args, base, tok, device)
        return
    for name in args.shapes.split(","):
        t0 = time.perf_counter()
        res["shapes"][name] = run_shape(name, (TINY if args.tiny else SHAPES)[name], base, tok, args, device)
        print(f"shape {name}: {time.perf_counter() - t0:.1f} s", flush=True)
        (args.out / "gpu_rl_update.json").write_text(json.dumps(res, indent=1, default=str))
    report(res)


if __name__ == "__main__":
    main()
