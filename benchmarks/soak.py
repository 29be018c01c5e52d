"""Soak test: ``verigym eval`` against a fault-injecting server under random SIGKILL/resume cycles, and a
concurrent ``verigym serve`` under mixed load (abandoned streams, malformed bodies), for ``--minutes``.

    .venv/bin/python benchmarks/soak.py --minutes 30 --seed 0 --out runs/soak

Eval side: a fake OpenAI server on 127.0.0.1 (``verigym.testing``: uvicorn) answers arithmetic prompts ("12+34=") and injects a fault
into a share of requests: HTTP 500, HTTP 429 (Retry-After), a hang past the client's timeout, a body
cut off mid-JSON, and a 200 with a body that is not JSON. Each round is one eval run (``-n`` tasks,
``-k`` samples) that is started with ``--resume`` (always, as a script would), SIGKILLed after a
random delay, restarted, ... and finally run to the end. The round's ``results.jsonl`` must then hold
every ``(task_id, sample_index)`` exactly once with a score (lost = missing or errored, duplicated
= a key on more than one line) and every answer scored correct (the fake model is always right:
a fault scored as reward 0 would show here as ``wrong``).

Serve side: ``verigym serve tiny`` in a subprocess; a load thread sends plain chat requests,
streams read to the end, streams abandoned after two chunks, completions (streamed and not), and
malformed bodies (each must get a 4xx JSON error). Beside it, ``--slow-clients`` connections hold
half-sent headers or trickle bodies a byte a second (reopened as the server cuts them at its
``--slow-deadline`` read deadlines, issue 42 item 5), and a prober asks ``/health`` twice a second:
every slow client must be cut within the deadline plus a few seconds, and ``/health`` must keep
answering. The server's RSS is read from /proc at the start and the end; a server that dies is
restarted and counted.

The training side of issue 42's soak (kills, a full disk, a non-finite reward burst) is
``benchmarks/soak_train.py``.

Prints one JSON report (also written to OUT/report.json) and MET/NOT MET for the issue's targets:
0 lost, 0 duplicated, 0 server restarts, 0 faults scored as wrong answers, malformed bodies all 4xx.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from _soak_slow import SlowClients  # benchmarks/: the script's own folder is on sys.path
from verigym.testing import FakeOpenAIServer, arithmetic_answer

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ("500", "429", "hang", "cut", "badjson")


def fault_server(fault_rate: float, seed: int, hang_s: float) -> FakeOpenAIServer:
    """An OpenAI-compatible chat endpoint (``verigym.testing``, uvicorn on 127.0.0.1) that answers
    arithmetic exactly or, for a ``fault_rate`` share of requests, injects one of ``FAULTS``."""
    rng = random.Random(seed)

    def plan(body: dict[str, Any], attempt: int) -> str | None:
        return rng.choice(FAULTS) if rng.random() < fault_rate else None

    return FakeOpenAIServer(
        plan,
        answer=arithmetic_answer,
        slow_s=hang_s,
        retry_after="0.2",
        models=("fake",),
        keep_requests=False,
    )


def _expected_keys(n: int, k: int, seed: int) -> set[tuple[str, int]]:
    from verigym.envs.registry import load_env

    tasks = load_env("arithmetic").tasks(n, seed=seed)
    return {(t.id, i) for t in tasks for i in range(k)}


def _audit(out: Path, expected: set[tuple[str, int]]) -> dict[str, int]:
    seen: Counter[tuple[str, int]] = Counter()
    scored: set[tuple[str, int]] = set()
    wrong = 0
    path = out / "results.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        if not line.strip():
            continue
        rec = json.loads(line)
        key = (rec["task_id"], rec["sample_index"])
        seen[key] += 1
        if rec.get("error") is None and rec["score"].get("reward") is not None:
            scored.add(key)
            wrong += rec["score"]["reward"] < 1.0
    return {
        "lost": len(expected - scored),
        "duplicated": sum(c - 1 for c in seen.values() if c > 1),
        "unexpected": len(set(seen) - expected),
        "wrong": wrong,
    }


def eval_round(url: str, out: Path, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    """One eval run killed ``kills`` times at random moments, then finished; audited."""
    config = out.parent / "soak_eval.toml"
    # fail_on_error off: the injected faults may leave a run's last samples errored (the next
    # --resume redoes them; the audit counts what is lost); only a crash is a bad exit
    config.write_text(
        f"timeout = {args.client_timeout}\nmax_retries = 12\nconcurrency = 8\nfail_on_error = false\n"
    )
    cmd = [
        sys.executable, "-m", "verigym", "eval", "arithmetic", "--base-url", url, "--model", "fake",
        "-n", str(args.tasks), "-k", str(args.samples), "--seed", str(args.seed), "--out", str(out),
        "--config", str(config), "--resume",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    kills = exits_bad = mid = 0
    for _ in range(rng.randint(1, args.max_kills)):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        try:
            proc.wait(timeout=rng.uniform(1.0, args.kill_after_s))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            results = out / "results.jsonl"
            mid += results.exists() and results.stat().st_size > 0  # killed with records on disk
            continue
        if proc.returncode != 0:
            exits_bad += 1
        break
    final = None
    for _ in range(3):  # run to the end: a run may end with a few samples errored, a resume redoes them
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        final = done
        audit = _audit(out, _expected_keys(args.tasks, args.samples, args.seed))
        if audit["lost"] == 0:
            break
    assert final is not None
    if final.returncode != 0:
        exits_bad += 1
        print(f"eval exited {final.returncode}: {final.stderr.strip()[-300:]}", file=sys.stderr)
    return {"kills": kills, "kills_mid_run": mid, "bad_exits": exits_bad, **audit}


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


MALFORMED: list[bytes | dict[str, Any]] = [
    b"{not json",
    b"",
    b"[]",
    {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"},
    {"model": "tiny", "messages": [{"role": "user", "content": "\ud800"}]},
    {"model": "tiny", "messages": []},
    {"model": "tiny", "messages": [{"role": "wizard", "content": "hi"}]},
    {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "n": 0},
    {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": -1},
    {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"},
    {"messages": [{"role": "user", "content": "hi"}]},
]


class ServeLoad:
    """Mixed load against one ``verigym serve``; restarts it if it dies (and counts that)."""

    def __init__(self, seed: int, *flags: str) -> None:
        from verigym.serve import spawn_server

        self.flags = ("--name", "tiny", *flags)
        self._spawn = spawn_server
        self.proc, self.url = spawn_server("tiny", *self.flags)
        self.rng = random.Random(seed)
        self.counts: Counter[str] = Counter()
        self.restarts = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _one(self, client: httpx.Client) -> None:
        kind = self.rng.choice(["chat", "stream", "abandon", "abandon", "completion", "cstream", "bad"])
        msg = {"model": "tiny", "messages": [{"role": "user", "content": "12+34="}], "max_tokens": 8}
        self.counts["requests"] += 1
        if kind == "chat":
            r = client.post(f"{self.url}/chat/completions", json=msg)
            self.counts["ok" if r.status_code == 200 else f"http_{r.status_code}"] += 1
        elif kind in ("stream", "abandon", "cstream"):
            body: dict[str, Any] = {**msg, "stream": True}
            path = "chat/completions"
            if kind == "cstream":
                body = {"model": "tiny", "prompt": "12+34=", "max_tokens": 8, "stream": True}
                path = "completions"
            if kind == "abandon":
                body["max_tokens"] = 256
            with client.stream("POST", f"{self.url}/{path}", json=body) as r:
                if r.status_code != 200:
                    self.counts[f"http_{r.status_code}"] += 1
                    return
                for i, _ in enumerate(r.iter_lines()):
                    if kind == "abandon" and i >= 2:
                        self.counts["abandoned"] += 1
                        return
            self.counts["ok"] += 1
        elif kind == "completion":
            r = client.post(
                f"{self.url}/completions", json={"model": "tiny", "prompt": "1+1=", "max_tokens": 4}
            )
            self.counts["ok" if r.status_code == 200 else f"http_{r.status_code}"] += 1
        else:
            bad = self.rng.choice(MALFORMED)
            if isinstance(bad, bytes):
                r = client.post(
                    f"{self.url}/chat/completions", content=bad, headers={"Content-Type": "application/json"}
                )
            else:
                raw = json.dumps(bad).encode("utf-8", "surrogatepass")
                r = client.post(
                    f"{self.url}/chat/completions", content=raw, headers={"Content-Type": "application/json"}
                )
            good = 400 <= r.status_code < 500 and "error" in r.json()
            self.counts["malformed_4xx" if good else "malformed_not_4xx"] += 1

    def _loop(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self.stop.is_set():
                if self.proc.poll() is not None:
                    self.restarts += 1
                    self.proc, self.url = self._spawn("tiny", *self.flags)
                try:
                    self._one(client)
                except (httpx.HTTPError, ValueError) as exc:
                    self.counts[f"client_error_{type(exc).__name__}"] += 1
                time.sleep(0.05)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(90)
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="How long to soak (default 30).")
    ap.add_argument("--seed", type=int, default=0, help="Seed of faults, kill times and load (default 0).")
    ap.add_argument("--out", type=Path, default=Path("runs/soak"), help="Work folder (default runs/soak).")
    ap.add_argument("--tasks", type=int, default=30, help="Tasks per eval round (default 30).")
    ap.add_argument("--samples", type=int, default=2, help="Samples per task (default 2).")
    ap.add_argument("--fault-rate", type=float, default=0.3, help="Share of requests faulted (default 0.3).")
    ap.add_argument("--max-kills", type=int, default=4, help="Most SIGKILLs per round (default 4).")
    ap.add_argument(
        "--kill-after-s", type=float, default=6.0, help="Longest delay before a kill (default 6)."
    )
    ap.add_argument("--client-timeout", type=float, default=2.0, help="Eval request timeout, s (default 2).")
    ap.add_argument("--no-serve", action="store_true", help="Skip the concurrent verigym serve load.")
    ap.add_argument("--no-eval", action="store_true", help="Skip the eval rounds (serve side only).")
    ap.add_argument("--slow-clients", type=int, default=100, help="Slow connections held (default 100).")
    ap.add_argument(
        "--slow-deadline",
        type=float,
        default=10.0,
        help="Server's header/body read deadline, s (default 10).",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    t0 = time.monotonic()
    deadline = t0 + args.minutes * 60
    faults = fault_server(args.fault_rate, args.seed, hang_s=args.client_timeout * 3).start()
    deadline_flags = ("--header-timeout", str(args.slow_deadline), "--body-timeout", str(args.slow_deadline))
    load = None if args.no_serve else ServeLoad(args.seed, *deadline_flags)
    slow = None if load is None or not args.slow_clients else SlowClients(load, args.slow_clients)
    rss_start = 0
    if load is not None:
        load.thread.start()
        for thread in slow.threads if slow is not None else []:
            thread.start()
        time.sleep(5)  # warm: the first passes allocate
        rss_start = _rss_kb(load.proc.pid)
    rounds: list[dict[str, Any]] = []
    while args.no_eval and time.monotonic() < deadline:
        time.sleep(1)
    while not args.no_eval and time.monotonic() < deadline:
        out = args.out / f"round{len(rounds):03d}"
        if out.exists():
            import shutil

            shutil.rmtree(out)
        rounds.append(eval_round(faults.url, out, args, rng))
        print(f"round {len(rounds)}: {rounds[-1]}", flush=True)
    rss_end = _rss_kb(load.proc.pid) if load is not None and load.proc.poll() is None else 0
    if slow is not None:
        slow.stop.set()
        for thread in slow.threads:
            thread.join(30)
    if load is not None:
        load.finish()
    faults.stop()
    total = {
        k: sum(r[k] for r in rounds)
        for k in ("kills", "kills_mid_run", "bad_exits", "lost", "duplicated", "unexpected", "wrong")
    }
    report = {
        "minutes": round((time.monotonic() - t0) / 60, 2),
        "seed": args.seed,
        "eval_rounds": len(rounds),
        "eval_samples": len(rounds) * args.tasks * args.samples,
        "fault_server_requests": faults.n_requests,
        "faults_injected": dict(faults.faults),
        **total,
        "serve": None
        if load is None
        else {
            **dict(load.counts),
            "restarts": load.restarts,
            "rss_start_mib": round(rss_start / 1024, 1),
            "rss_end_mib": round(rss_end / 1024, 1),
        },
        "slow_clients": None
        if slow is None
        else {"held": args.slow_clients, "deadline_s": args.slow_deadline, **slow.report()},
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    checks = {
        "0 records lost": total["lost"] == 0,
        "0 duplicated": total["duplicated"] == 0,
        "0 faults scored as wrong answers": total["wrong"] == 0,
        "0 server restarts": load is None or load.restarts == 0,
        "malformed bodies all 4xx": load is None or load.counts["malformed_not_4xx"] == 0,
        "slow clients cut within the deadline + 5 s": slow is None
        or (slow.counts["cut"] > 0 and slow.held_max_s <= args.slow_deadline + 5),
        "/health answered throughout": slow is None or slow.counts["health_failed"] == 0,
    }
    for name, ok in checks.items():
        print(f"{'MET' if ok else 'NOT MET'}: {name}")
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
