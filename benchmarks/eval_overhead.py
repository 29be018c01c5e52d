"""Eval engine overhead: verigym vs vf-eval vs bare AsyncOpenAI vs bare aiohttp, side by side.

One local OpenAI-compatible server (aiohttp, a separate process) answers every chat request at
once with a fixed completion (also as SSE when ``stream=true``). The same single-turn work — the
prompts of the built-in ``arithmetic`` environment, N rollouts at concurrency C — is run by:

  (a) verigym: ``verigym.eval.run.evaluate`` (runner + rubric + results.jsonl) with ``OpenAIPolicy``
      on each of its transports: direct aiohttp (default), the SDK on aiohttp, the SDK on httpx;
  (b) verifiers' ``vf-eval`` from ``.bench/venv`` (fewer rollouts: it is orders of magnitude slower);
  (c) a bare ``openai.AsyncOpenAI`` loop (default httpx client, and with ``DefaultAioHttpClient``);
  (d) a bare ``aiohttp`` loop — the limit of this machine and server.

It also times the engine alone with an in-process policy that answers instantly, which is
verigym's own cost per rollout. Beside each rate it prints the client's CPU time per rollout
(``time.process_time`` of this process, every thread): on this 2-core machine the instant server
and other jobs share the cores, so a rate moves with the load while the client's CPU per rollout
barely does. Target (issue 17 item 3): the median per-round ratio of verigym (summary and report
written) to bare aiohttp >= 80%, and the engine alone <= 0.25 ms per rollout.
Run: ``python benchmarks/eval_overhead.py [--rounds 4] [--only main,sdk,...]`` (``--help``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LIMIT = "(d) bare aiohttp"
MAIN = "(a) verigym eval, aiohttp transport"
FULL = f"{MAIN} incl. summary+report"
Contender = Callable[[], dict[str, tuple[float, float]]]  # one run: {row: (seconds, client CPU seconds)}
ANSWER = "The answer is 42."
KEYS = ("limit", "openai-httpx", "openai-aiohttp", "main", "async", "defgc", "sdk", "sdk-httpx")


# --------------------------------------------------------------------------- the server
def serve(port: int) -> None:
    """An instant OpenAI-compatible server (run in its own process)."""
    from aiohttp import web

    def payload(model: str) -> bytes:
        return json.dumps(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ).encode()

    body = payload("bench")

    def chunk(delta: dict[str, Any], finish: str | None) -> bytes:
        data = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "bench",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    stream = (
        chunk({"role": "assistant", "content": ""}, None)
        + chunk({"content": ANSWER}, None)
        + chunk({}, "stop")
        + b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"bench",'
        b'"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}\n\n'
        + b"data: [DONE]\n\n"
    )

    async def chat(request: web.Request) -> web.Response:
        raw = await request.read()
        if b'"stream":true' in raw.replace(b" ", b""):
            return web.Response(body=stream, content_type="text/event-stream")
        return web.Response(body=body, content_type="application/json")

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "bench", "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, backlog=1024)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return proc, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("benchmark server did not start")


# --------------------------------------------------------------------------- the clients
def prompts(n: int) -> list[str]:
    from verigym.envs.builtin.arithmetic import ArithmeticEnv

    return [t.prompt[-1].content for t in ArithmeticEnv().tasks(n, seed=0)]


async def bounded(n: int, concurrency: int, one: Callable[[int], Awaitable[None]]) -> None:
    limit = asyncio.Semaphore(concurrency)

    async def run(i: int) -> None:
        async with limit:
            await one(i)

    await asyncio.gather(*(run(i) for i in range(n)))


async def bare_aiohttp(url: str, texts: Sequence[str], concurrency: int) -> tuple[float, float]:
    """(seconds, client CPU seconds) for the rollouts."""
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def one(i: int) -> None:
            body = {"model": "bench", "messages": [{"role": "user", "content": texts[i]}], "max_tokens": 64}
            async with session.post(f"{url}/chat/completions", json=body) as resp:
                data = await resp.json()
                assert data["choices"][0]["message"]["content"] == ANSWER

        await bounded(min(64, len(texts)), concurrency, one)  # warm the connections
        start, cpu = time.perf_counter(), time.process_time()
        await bounded(len(texts), concurrency, one)
        return time.perf_counter() - start, time.process_time() - cpu


async def bare_openai(
    url: str, texts: Sequence[str], concurrency: int, transport: str
) -> tuple[float, float]:
    import openai

    http: Any = openai.DefaultAioHttpClient() if transport == "aiohttp" else openai.DefaultAsyncHttpxClient()
    client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0, http_client=http)

    async def one(i: int) -> None:
        r = await client.chat.completions.create(
            model="bench", messages=[{"role": "user", "content": texts[i]}], max_tokens=64
        )
        assert r.choices[0].message.content == ANSWER

    await bounded(min(64, len(texts)), concurrency, one)
    start, cpu = time.perf_counter(), time.process_time()
    await bounded(len(texts), concurrency, one)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    await client.close()
    return elapsed, cpu


def arithmetic_env(async_grader: bool = False, threaded: bool = False) -> Any:
    """The built-in arithmetic env; optionally with its grader wrapped as ``async def``, or given
    as a user's sync grader.

    Its built-in grader is ``inline`` (declared cheap and bounded: it runs on the event loop); a
    user's sync grader runs in a worker thread per call (so a slow one can time out without
    stalling the loop); an async one runs on the loop, as verifiers' reward functions do.
    """
    from verigym.envs.builtin.arithmetic import ArithmeticEnv, correct
    from verigym.rubric import Grader, Rubric

    env = ArithmeticEnv()
    if async_grader:

        async def correct_async(task: Any, trajectory: Any) -> Any:
            return correct(task, trajectory)

        env.rubric = Rubric([Grader(correct_async, name="correct")])
    elif threaded:
        env.rubric = Rubric([Grader(correct, name="correct")])
    return env


async def verigym_eval(
    url: str, n: int, concurrency: int, transport: str, async_grader: bool = False
) -> tuple[float, float, float]:
    """(rollout phase seconds, total seconds including summary.json and report.html, CPU seconds of
    this process over the total)."""
    from verigym.eval.config import EvalConfig
    from verigym.eval.run import evaluate
    from verigym.policies.openai import OpenAIPolicy

    env = arithmetic_env(async_grader)
    policy = OpenAIPolicy("bench", [url], concurrency=concurrency, transport=transport)  # type: ignore[arg-type]
    warm = env.tasks(64, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        config = EvalConfig(env="arithmetic", num_tasks=n, concurrency=concurrency, max_tokens=64)
        await evaluate(env, policy, warm, config, out=Path(tmp) / "warm")
        tasks = env.tasks(n, seed=0)
        marks: dict[str, float] = {}
        count = [0]

        def on_record(record: Any) -> None:
            count[0] += 1
            if count[0] == n:
                marks["last"] = time.perf_counter()

        start, cpu = time.perf_counter(), time.process_time()
        result = await evaluate(
            env,
            policy,
            tasks,
            config,
            out=Path(tmp) / "run",
            on_start=lambda *_: marks.setdefault("start", time.perf_counter()),
            on_record=on_record,
        )
        total, cpu = time.perf_counter() - start, time.process_time() - cpu
        assert result.summary["n_scored"] == n, result.summary
    await policy.aclose()
    return marks["last"] - marks["start"], total, cpu  # rollout phase: first rollout to last record


async def engine_only(n: int, concurrency: int, async_grader: bool = False, threaded: bool = False) -> float:
    """run_rollouts + rubric with a policy that answers at once (no HTTP): verigym's own cost."""
    from verigym.runner import run_rollouts
    from verigym.types import Completion, Sampling, Usage

    done = Completion(text=ANSWER, usage=Usage(prompt_tokens=10, completion_tokens=5))

    class Instant:
        name = "instant"

        async def complete(self, messages: Any, *, tools: Any = None, sampling: Any) -> Completion:
            await asyncio.sleep(0)
            return done

    env = arithmetic_env(async_grader, threaded)
    tasks = env.tasks(n, seed=0)  # generating tasks is the environment's cost, not the engine's
    sampling = Sampling(max_tokens=64, seed=0)
    start = time.perf_counter()
    await run_rollouts(
        env, Instant(), tasks, samples_per_task=1, sampling=sampling, concurrency=concurrency,
        env_name="arithmetic", model_name="instant", on_record=lambda r: r.model_dump_json(),
    )  # fmt: skip
    return time.perf_counter() - start


VF_TASKSET = """
import json, os
import verifiers.v1 as vf


class BenchData(vf.TaskData):
    pass


class BenchTask(vf.Task[BenchData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def correct(self, trace) -> float:
        return 1.0 if "The answer is 42" in str(trace) else 0.0


class BenchTaskset(vf.Taskset[BenchTask, vf.TasksetConfig]):
    def load(self):
        with open(os.environ["VGBENCH_PROMPTS"]) as fh:
            for i, text in enumerate(json.load(fh)):
                yield BenchTask(BenchData(name=f"t{i}", prompt=text), self.config.task)


__all__ = ["BenchTaskset"]
"""


def run_vf_eval(url: str, texts: Sequence[str], concurrency: int, timeout: float) -> tuple[float | None, str]:
    """vf-eval on the same prompts: its null harness (plain chat) on its local subprocess runtime.

    Returns (rollouts/s, a line saying what ran) or (None, why it could not run).
    """
    venv = ROOT / ".bench" / "venv" / "bin"
    vf_eval = venv / "vf-eval"
    if not vf_eval.exists():
        return None, f"cannot run: {vf_eval} is missing (verifiers is not installed in .bench/venv)"
    path = os.pathsep.join([str(venv), os.environ.get("PATH", "")])
    if shutil.which("uv", path=path) is None:
        return None, (
            "cannot run: its harness prepares each agent program with `uv` (and without it downloads "
            "uv from astral.sh, which is unreachable offline); `.bench/venv/bin/pip install uv` fixes it"
        )
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / "vgbench_vf"
        pkg.mkdir()
        (pkg / "__init__.py").write_text(VF_TASKSET)
        (Path(tmp) / "prompts.json").write_text(json.dumps(list(texts)))
        env = {
            **os.environ,
            "PATH": path,
            "PYTHONPATH": tmp,
            "VGBENCH_PROMPTS": str(Path(tmp) / "prompts.json"),
            "OPENAI_API_KEY": "x",
            "UV_PYTHON_DOWNLOADS": "never",
        }
        cmd = [
            str(vf_eval), "vgbench-vf", "-m", "bench", "--client.base-url", url,
            "--client.api-key-var", "OPENAI_API_KEY", "-n", str(len(texts)), "-r", "1",
            "-c", str(concurrency), "--no-push", "-o", str(Path(tmp) / "out"),
            "--env.agent.harness.id", "null", "--env.agent.runtime.type", "subprocess",
        ]  # fmt: skip
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"did not finish {len(texts)} rollouts within {timeout:.0f}s"
        wall = time.perf_counter() - start
        traces = list((Path(tmp) / "out").glob("*/traces.jsonl"))
        done = sum(1 for t in traces for line in t.read_text().splitlines() if json.loads(line).get("ok"))
        if proc.returncode != 0 or not done:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"failed (exit {proc.returncode}): {tail[0][:300]}"
    version = subprocess.run([str(venv / "python"), "-c", "import verifiers; print(verifiers.__version__)"],
                             capture_output=True, text=True).stdout.strip()  # fmt: skip
    line = (
        f"verifiers {version}, null harness on its subprocess runtime, {len(texts)} rollouts "
        f"({done} succeeded) in {wall:.1f}s including its start-up"
    )
    return len(texts) / wall, line


# --------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rollouts", type=int, default=2000, help="rollouts per contender (default 2000)")
    ap.add_argument("--concurrency", type=int, default=64, help="requests in flight (default 64)")
    ap.add_argument("--vf-rollouts", type=int, default=40, help="rollouts given to vf-eval (default 40)")
    ap.add_argument("--vf-timeout", type=float, default=240.0, help="seconds before vf-eval is stopped")
    ap.add_argument("--skip-vf", action="store_true", help="do not run vf-eval")
    ap.add_argument("--rounds", type=int, default=2, help="rounds over all contenders; best kept (default 2)")
    ap.add_argument(
        "--only",
        default="",
        help="comma-separated contender keys to run (default all): "
        + ", ".join(KEYS)
        + f"; '{KEYS[0]}' and 'main' always run",
    )
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return
    from verigym.runner import tuned_gc

    n, c = args.rollouts, args.concurrency
    server, url = start_server()
    rates: dict[str, float] = {}
    cpus: dict[str, list[float]] = {}
    try:
        texts = prompts(n)
        print(f"eval overhead: {n} single-turn rollouts, concurrency {c}, server {url} (instant answers)")
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}\n")

        def vg(name: str, transport: str, async_grader: bool = False, cli_gc: bool = True) -> Contender:
            def run() -> dict[str, tuple[float, float]]:
                # `verigym eval` runs its event loop under runner.tuned_gc(); do the same here
                with tuned_gc() if cli_gc else contextlib.nullcontext():
                    phase, total, cpu = asyncio.run(verigym_eval(url, n, c, transport, async_grader))
                if name == MAIN:  # the same run, timed to the end of summary.json and report.html
                    return {name: (phase, math.nan), FULL: (total, cpu)}
                return {name: (phase, cpu)}  # CPU over the whole run, summary and report included

            return run

        def bare(name: str, coro: Callable[[], Any]) -> Contender:
            def run() -> dict[str, tuple[float, float]]:
                with tuned_gc():  # the same GC settings as verigym's main row: no side gets an edge
                    return {name: asyncio.run(coro())}

            return run

        every: dict[str, Contender] = {
            "limit": bare(LIMIT, lambda: bare_aiohttp(url, texts, c)),
            "openai-httpx": bare(
                "(c) bare AsyncOpenAI, httpx (SDK default)", lambda: bare_openai(url, texts, c, "httpx")
            ),
            "openai-aiohttp": bare(
                "(c') bare AsyncOpenAI, aiohttp transport", lambda: bare_openai(url, texts, c, "aiohttp")
            ),
            "main": vg(MAIN, "aiohttp"),
            "async": vg("(a) verigym eval, async grader", "aiohttp", async_grader=True),
            "defgc": vg("(a) verigym eval, default GC settings", "aiohttp", cli_gc=False),
            "sdk": vg("(a') verigym eval, SDK + its aiohttp client", "sdk"),
            "sdk-httpx": vg("(a') verigym eval, SDK + httpx (default)", "sdk-httpx"),
        }
        only = {k.strip() for k in args.only.split(",") if k.strip()}
        if only - set(KEYS):
            raise SystemExit(
                f"--only: unknown contender(s) {sorted(only - set(KEYS))}; known: {', '.join(KEYS)}"
            )
        contenders = [f for k, f in every.items() if not only or k in only or k in ("limit", "main")]
        # Rounds interleave the contenders (the order reverses every round) and keep each one's best:
        # the machine is shared, and a neighbour's burst should not decide a ratio. Each round's
        # verigym / aiohttp pair is also kept, for the per-round ratios and their median. Client CPU
        # time (this process, all threads) per rollout is kept too: it moves less with the load.
        pair_ratios: list[float] = []
        cpu_ratios: list[float] = []
        for r in range(args.rounds):
            this_round: dict[str, tuple[float, float]] = {}
            for contender in contenders if r % 2 == 0 else contenders[::-1]:
                for name, (seconds, cpu) in contender().items():
                    this_round[name] = (n / seconds, cpu)
                    rates[name] = max(rates.get(name, 0.0), n / seconds)
                    cpus.setdefault(name, []).append(1e3 * cpu / n)
                    cpu_text = "" if math.isnan(cpu) else f", CPU {1e3 * cpu / n:.3f} ms/rollout"
                    print(f"  round {r}: {name}: {n / seconds:.1f} rollouts/s{cpu_text}", flush=True)
            pair_ratios.append(this_round[FULL][0] / this_round[LIMIT][0])
            cpu_ratios.append(this_round[LIMIT][1] / this_round[FULL][1])
        with tuned_gc():  # best of 3, as above, under the CLI's GC settings
            engine = min(asyncio.run(engine_only(n, c)) for _ in range(3))
            engine_async = min(asyncio.run(engine_only(n, c, True)) for _ in range(3))
            engine_thread = min(asyncio.run(engine_only(n, c, threaded=True)) for _ in range(3))
        vf_line = "skipped (--skip-vf)"
        if not args.skip_vf:
            vf_rate, vf_line = run_vf_eval(url, texts[: args.vf_rollouts], c, args.vf_timeout)
            if vf_rate is not None:
                rates["(b) vf-eval (verifiers)"] = vf_rate
    finally:
        server.terminate()
        server.wait(10)
    limit = rates[LIMIT]
    ours = rates[MAIN]
    width = max(len(k) for k in rates)
    print(
        f"\n{'contender':<{width}}  {'rollouts/s':>11}  {'vs (d) aiohttp':>15}  {'verigym (a) is':>15}"
        f"  {'client CPU ms/rollout (median)':>30}"
    )
    for name, rate in rates.items():
        cpu_ms = [x for x in cpus.get(name, []) if not math.isnan(x)]
        cpu_text = f"{statistics.median(cpu_ms):.3f}" if cpu_ms else "–"
        print(f"{name:<{width}}  {rate:>11.1f}  {rate / limit:>14.1%}  {ours / rate:>14.2f}x  {cpu_text:>30}")
    print(f"\n(b) vf-eval: {vf_line}")
    overhead_ms = 1000 * (1 / ours - 1 / limit)
    print(
        f"verigym engine alone (instant in-process policy): {1e3 * engine / n:.3f} ms per rollout "
        f"(the env's built-in inline grader), {1e3 * engine_thread / n:.3f} ms (the same grader as a "
        f"user's sync grader, in a thread), {1e3 * engine_async / n:.3f} ms (async grader)"
    )
    print(f"verigym overhead over bare aiohttp: {overhead_ms:.3f} ms per rollout of throughput")
    print(
        "per-round verigym (incl. summary+report) / bare aiohttp, throughput: "
        + ", ".join(f"{x:.1%}" for x in pair_ratios)
        + f"; median {statistics.median(pair_ratios):.1%}"
    )
    print(
        "per-round bare aiohttp client CPU / verigym (incl. summary+report) client CPU: "
        + ", ".join(f"{x:.1%}" for x in cpu_ratios)
        + f"; median {statistics.median(cpu_ratios):.1%}"
    )
    full = statistics.median(pair_ratios)
    verdict = "MET" if full >= 0.8 and 1e3 * engine / n <= 0.25 else "NOT MET"
    print(
        "target (issue 17: >= 80% of bare aiohttp with summary and report written, <= 0.25 ms framework "
        f"overhead per rollout): {verdict}"
    )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
