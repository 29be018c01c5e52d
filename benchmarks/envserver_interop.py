"""Environments over HTTP with peers nobody here wrote (issue 39 item 5), run in the bench venv:

    make bench-venv
    .bench/venv/bin/python benchmarks/envserver_interop.py [--parts openenv-init,generic-client,trl] [--json]

Three checks, each printing PASS / FAIL with its figures:

- ``openenv-init``: ``openenv init`` writes its template environment (the echo environment); openenv's
  own server (``uvicorn server.app:app``, the template's app, with ``max_concurrent_envs`` raised from 1
  to 8 as its comment says to) serves it; ``verigym eval URL`` (the main venv, a subprocess) evaluates it
  with the tiny model, and ``verigym train`` runs RL steps on it from a config whose ``[[envs]] name`` is
  the URL. verigym evaluates and trains on an OpenEnv environment it did not write.
- ``generic-client``: openenv's ``GenericEnvClient`` drives ``verigym env-server calc`` through full
  episodes (reset, a ``calc`` tool call, the answer): right answers get reward 1, wrong ones 0.
- ``trl``: TRL's ``GRPOTrainer`` with ``environment_factory`` trains steps against ``verigym env-server
  calc --env-arg verbose=true``: the environment class is TRL's OpenEnv pattern (its public methods are
  the tools, ``reset`` opens the episode), here over openenv's ``GenericEnvClient``; the reward is the
  server's (the model's final answer is sent as the last step; ``reward_funcs`` reads it). The tokenizer
  is SmolLM2-135M-Instruct's (``verigym models pull``) with TRL's shipped Qwen3 chat template, so TRL can
  parse tool calls; ``--trl-steps`` steps of ``--trl-batch`` rollouts. The model (``--model``): by
  default SmolLM2-135M-Instruct's architecture and tokenizer at a tiny size (2 layers x 64), randomly
  initialised: the check is the plumbing (sessions, tool calls, the server's reward), not learning; or
  a real model (``--model smollm2-135m-instruct``).

verigym runs from the main venv (``.venv/bin/verigym``); this script imports nothing of verigym.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / ".venv" / "bin"
BENCH = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(cmd: list[str], port: int, cwd: Path | None = None, log: Path | None = None) -> Iterator[str]:
    """``cmd`` running until its ``/health`` answers on ``port``; stopped on exit."""
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1):
                    break
            except OSError:
                if time.monotonic() > end:
                    raise RuntimeError(f"{' '.join(cmd)}: /health never answered") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if log is not None:
            out.close()  # type: ignore[union-attr]


def verigym(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MAIN / "verigym"), *args], capture_output=True, text=True, timeout=900)


TRAIN = """
seed = 0
out_dir = "{out}"

[[envs]]
name = "{url}"
args = {{ max_turns = 1 }}

[model]
tiny = "tiny"

[sampling]
max_tokens = 12

[rl]
preset = "grpo"
steps = {steps}
groups_per_step = 2
group_size = 4

[eval]
tasks = 4
"""


def openenv_init(work: Path, steps: int) -> dict[str, Any]:
    """``openenv init`` → openenv's server → ``verigym eval URL`` and ``verigym train`` on it."""
    subprocess.run([str(BENCH / "openenv"), "init", "echo_env"], cwd=work, check=True, capture_output=True)
    env_dir = work / "echo_env"
    app = env_dir / "server" / "app.py"
    app.write_text(app.read_text().replace("max_concurrent_envs=1,", "max_concurrent_envs=8,"))
    port = free_port()
    cmd = [
        str(BENCH / "python"),
        "-m",
        "uvicorn",
        "server.app:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    out: dict[str, Any] = {}
    with serving(cmd, port, cwd=env_dir, log=work / "openenv_server.log") as url:
        ev = verigym(
            "eval", url, "-n", "8", "--model", "tiny", "--max-tokens", "12", "--seed", "0",
            "--env-arg", "max_turns=2", "--out", str(work / "eval"),
        )  # fmt: skip
        if ev.returncode != 0:
            return {
                "ok": False,
                "why": f"verigym eval exited {ev.returncode}: {ev.stdout[-800:]}{ev.stderr[-800:]}",
            }
        summary = json.loads((work / "eval" / "summary.json").read_text())
        first = json.loads((work / "eval" / "results.jsonl").read_text().splitlines()[0])
        out["eval"] = {k: summary[k] for k in ("n_samples", "n_errors", "reward_mean")}
        out["eval"]["prompt"] = first["trajectory"]["prompt"][0]["content"]
        out["eval"]["token_ids_exact"] = all(
            t["completion"]["token_ids_exact"] for t in first["trajectory"]["turns"] if t["completion"]
        )
        cfg = work / "train.toml"
        cfg.write_text(TRAIN.format(out=work / "train", url=url, steps=steps))
        tr = verigym("train", str(cfg), "--threads", "1")
        if tr.returncode != 0:
            return {
                **out,
                "ok": False,
                "why": f"verigym train exited {tr.returncode}: {tr.stdout[-800:]}{tr.stderr[-800:]}",
            }
        train = json.loads((work / "train" / "summary.json").read_text())
        out["train"] = {k: train[k] for k in ("steps", "train_samples", "train_samples_errored")}
    ok = (
        out["eval"]["n_errors"] == 0
        and out["eval"]["reward_mean"] > 0
        and out["eval"]["prompt"] == "Echo Env environment ready!"
        and out["train"]["steps"] == steps
        and out["train"]["train_samples_errored"] == 0
    )
    return {**out, "ok": ok}


def _calc_call(expr: str, n: int = 0) -> dict[str, Any]:
    return {
        "id": f"c{n}",
        "type": "function",
        "function": {"name": "calc", "arguments": json.dumps({"expr": expr})},
    }


def generic_client(url: str, episodes: int) -> dict[str, Any]:
    """openenv's ``GenericEnvClient`` through whole calc episodes on ``verigym env-server``."""
    from openenv.core.generic_client import GenericEnvClient

    rewards: dict[str, list[float]] = {"right": [], "wrong": []}
    turns = []
    for i in range(episodes):
        wrong = i % 2 == 1
        with GenericEnvClient(base_url=url).sync() as env:
            r = env.reset(seed=0, index=i)
            asked = re.search(r"\d+\*\d+", r.observation["messages"][-1]["content"])
            assert asked is not None, r.observation
            r = env.step({"content": "", "tool_calls": [_calc_call(asked.group(0))]})
            result = int(r.observation["reply"][0]["content"])
            r = env.step({"content": str(result + 1 if wrong else result)})
            turns.append(r.observation["turn"])
            assert r.done, r.observation
            rewards["wrong" if wrong else "right"].append(float(r.reward))
    ok = all(x == 1.0 for x in rewards["right"]) and all(x == 0.0 for x in rewards["wrong"])
    return {"ok": ok, "episodes": episodes, "rewards": rewards, "model_turns": turns}


def trl_grpo(url: str, work: Path, steps: int, batch: int, model_dir: str, tiny: bool) -> dict[str, Any]:
    """TRL's ``GRPOTrainer`` with ``environment_factory`` against ``verigym env-server calc``."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    import trl
    from datasets import Dataset
    from openenv.core.generic_client import GenericEnvClient
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(2)
    episodes = {"opened": 0, "tool_calls": 0, "ended_by_answer": 0, "rewards": []}

    class CalcServed:
        """calc on ``verigym env-server``, one OpenEnv WebSocket session per rollout."""

        def __init__(self) -> None:
            self.client: Any = None
            self.done, self.reward, self.calls = False, 0.0, 0

        def reset(self, index: int, **kwargs: Any) -> str:
            if self.client is not None:  # a fresh connection per episode: none sits idle between batches
                self.client.close()
            self.client = GenericEnvClient(base_url=url, message_timeout_s=600).sync()
            self.client.connect()
            r = self.client.reset(seed=0, index=int(index))
            self.done, self.reward, self.calls = False, 0.0, 0
            episodes["opened"] += 1
            return str(r.observation["messages"][-1]["content"])

        def calc(self, expr: str) -> str:
            """Evaluate an integer expression with + - * (e.g. "417*823"); returns the integer.

            Args:
                expr: the expression to evaluate
            """
            if self.done:
                return "Error: the episode is over"
            r = self.client.step({"content": "", "tool_calls": [_calc_call(expr, self.calls)]})
            self.calls += 1
            episodes["tool_calls"] += 1
            self._record(r)
            reply = r.observation.get("reply") or []
            return str(reply[0]["content"]) if reply else ""

        def _record(self, r: Any) -> None:
            if r.done:
                self.done, self.reward = True, float(r.reward or 0.0)

        def _answer(self, text: str) -> float:
            if not self.done:
                self._record(self.client.step({"content": text}))
                episodes["ended_by_answer"] += 1
            episodes["rewards"].append(self.reward)
            return self.reward

    def server_reward(
        completions: list[list[dict[str, Any]]], environments: list[CalcServed], **_: Any
    ) -> list[float]:
        out = []
        for completion, env in zip(completions, environments, strict=True):
            last = completion[-1] if completion else {}
            text = last.get("content") if last.get("role") == "assistant" else ""
            out.append(env._answer(text if isinstance(text, str) else ""))
        return out

    class Clock(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.times: list[float] = []
            self.t0 = 0.0

        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            self.times.append(time.perf_counter() - self.t0)

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    if tiny:  # SmolLM2's architecture and vocabulary at a tiny size, randomly initialised (seed 0)
        torch.manual_seed(0)
        small = {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
        }
        config = AutoConfig.from_pretrained(model_dir, **small, num_key_value_heads=2, head_dim=16)
        model = AutoModelForCausalLM.from_config(config)  # 3.2M parameters (the 49k-token embedding)
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    rows = [{"prompt": [{"role": "user", "content": ""}], "index": i} for i in range(steps * batch)]
    args = GRPOConfig(
        output_dir=str(work / "trl"),
        seed=0,
        use_cpu=True,
        bf16=False,
        max_steps=steps,
        learning_rate=1e-6,
        per_device_train_batch_size=batch,
        num_generations=batch,
        max_completion_length=48,
        max_tool_calling_iterations=2,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    clock = Clock()
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=server_reward,
        args=args,
        train_dataset=Dataset.from_list(rows),
        environment_factory=CalcServed,
        callbacks=[clock],
    )
    trainer.train()
    logged = [h for h in trainer.state.log_history if "reward" in h]
    ok = (
        len(clock.times) == steps
        and episodes["opened"] >= steps * batch
        and len(episodes["rewards"]) >= steps * batch
    )
    return {
        "ok": ok,
        "steps": len(clock.times),
        "s_per_step": [round(t, 1) for t in clock.times],
        "reward_per_step": [h["reward"] for h in logged],
        **{k: v for k, v in episodes.items() if k != "rewards"},
        "server_rewards": episodes["rewards"],
    }


def model_path(name: str) -> str:
    """A catalogue model's directory, pulled by the main venv's ``verigym`` when missing."""
    code = f"from verigym.policies.catalogue import pull; print(pull({name!r}))"
    done = subprocess.run([str(MAIN / "python"), "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="openenv-init,generic-client,trl")
    ap.add_argument("--episodes", type=int, default=6, help="generic-client episodes")
    ap.add_argument(
        "--train-steps", type=int, default=2, help="verigym train steps on the openenv-init environment"
    )
    ap.add_argument("--trl-steps", type=int, default=2)
    ap.add_argument("--trl-batch", type=int, default=4)
    ap.add_argument(
        "--model",
        default="tiny",
        help="TRL's model: 'tiny' (SmolLM2's architecture and tokenizer at 2 layers x 64, random), or a "
        "catalogue name or model directory (e.g. smollm2-135m-instruct)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="envserver-interop-") as tmp:
        work = Path(tmp)
        if "openenv-init" in parts:
            (work / "init").mkdir()
            results["openenv-init"] = openenv_init(work / "init", args.train_steps)
        if {"generic-client", "trl"} & set(parts):
            port = free_port()
            cmd = [
                str(MAIN / "verigym"),
                "env-server",
                "calc",
                "--port",
                str(port),
                "--env-arg",
                "verbose=true",
            ]
            with serving(cmd, port, log=work / "env_server.log") as url:
                if "generic-client" in parts:
                    results["generic-client"] = generic_client(url, args.episodes)
                if "trl" in parts:
                    name = "smollm2-135m-instruct" if args.model == "tiny" else args.model
                    model = name if Path(name).is_dir() else model_path(name)
                    results["trl"] = trl_grpo(
                        url, work, args.trl_steps, args.trl_batch, model, args.model == "tiny"
                    )
    for part, result in results.items():
        shown = {k: v for k, v in result.items() if k != "ok"}
        print(f"{part}: {'PASS' if result['ok'] else 'FAIL'}  {json.dumps(shown)}")
    if args.json:
        print(json.dumps(results))
    sys.exit(0 if all(r["ok"] for r in results.values()) else 1)


if __name__ == "__main__":
    main()
