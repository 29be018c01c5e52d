"""``verigym view`` at scale (issue 41 item 3): open and filter a 100,000-sample eval run, with the server's memory.

Writes an eval run of ``--samples`` records (``Record.model_dump_json``, the layout ``verigym eval``
writes: a system prompt, a user prompt, one assistant reply with per-token logprobs, two graders; 2% of
samples errored, a few replies holding a ``needle`` word) into a temporary folder, starts ``verigym view``
on it as a subprocess on 127.0.0.1, and times over HTTP, as the page asks them:

- **run list**: ``/api/runs`` (reads each run's ``summary.json``; the run is finished);
- **open**: the first ``/api/run`` plus the first page of ``/api/samples`` (the sample table as it first
  shows; the index is built on a background thread, and each answer waits up to 1 s for it, so a large
  run's first page holds the rows read so far); **indexed**: until ``/api/samples`` says the whole file
  is read (asked every 50 ms, as the page asks every second);
- **filters**: a page with ``reward_max=0``, with ``grader=format&grader_min=1``, ``error=any``, a task-id
  substring, a token range, a sort by reward, the free text ``needle`` (one scan of the file) and the
  last page of the run;
- **sample**: one sample page (read by its byte range).

The server's resident memory (``VmRSS``, and the peak ``VmHWM``, from ``/proc``) is read after each
size in ``--sizes``, each in a fresh server: memory flat in the run's size means the index costs bytes
per sample, never the records. The server's CPU seconds while it opens and indexes the run are printed
beside the wall time: on a shared machine the wall time is the CPU time stretched by the other load.
Targets: open < 2 s, every filter < 1 s at 100,000 samples.

    python benchmarks/view_scale.py [--sizes 10000,100000] [--json]

inspect-ai's ``inspect view`` is not compared: inspect-ai is not installed in the bench venv (see
``docs/viewer.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from verigym.types import (
    Completion,
    ErrorInfo,
    Grade,
    Message,
    Record,
    Sampling,
    Score,
    Trajectory,
    Turn,
    Usage,
)

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "from",
    "or",
    "an",
    "at",
    "which",
]


def write_run(folder: Path, n: int, seed: int = 0) -> Path:
    """An eval run folder of ``n`` samples (4 per task) and its config.json."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    system = Message(role="system", content="You are a careful assistant. Answer with the number only.")
    with (folder / "results.jsonl").open("w") as fh:
        for i in range(n):
            task, k = f"task-{i // 4:06d}", i % 4
            words = [rng.choice(WORDS) for _ in range(40)]
            if i % 997 == 0:
                words[rng.randrange(40)] = "needle"
            text = " ".join(words)
            lps = tuple(round(-rng.random() * 3, 4) for _ in range(48))
            ok = rng.random() < 0.4
            comp = Completion(
                text=text,
                completion_token_ids=tuple(rng.randrange(50000) for _ in range(48)),
                prompt_token_ids=tuple(range(60)),
                logprobs=lps,
                token_ids_exact=True,
                usage=Usage(prompt_tokens=60, completion_tokens=48),
                model="bench",
            )
            errored = i % 50 == 7
            prompt = [system, Message(role="user", content=f"What is {i} + {k}? Think about {text[:60]}")]
            traj = Trajectory(
                task_id=task,
                sample_index=k,
                prompt=prompt,
                turns=[Turn(source="model", messages=[comp.as_message()], completion=comp)],
                stop_reason="error" if errored else rng.choice(["done", "done", "done", "length"]),
                wall_s=rng.random(),
            )
            score = (
                Score(error="policy: connection reset")
                if errored
                else Score(
                    grades={
                        "correct": Grade(score=float(ok), detail=f"expected {i + k}"),
                        "format": Grade(score=float(rng.random() < 0.8), detail="number only"),
                    },
                    reward=float(ok),
                )
            )
            record = Record(
                env="bench",
                model="bench-model",
                task_id=task,
                sample_index=k,
                sampling=Sampling(temperature=1.0, max_tokens=64, seed=i),
                trajectory=traj,
                score=score,
                usage=Usage(prompt_tokens=60, completion_tokens=48),
                wall_s=rng.random(),
                error=ErrorInfo(kind="policy", message="connection reset") if errored else None,
            )
            fh.write(record.model_dump_json() + "\n")
    (folder / "config.json").write_text(json.dumps({"config": {"env": "bench", "model": "bench-model"}}))
    (folder / "summary.json").write_text(json.dumps({"n_samples": n, "n_errors": n // 50}))
    return folder / "results.jsonl"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[float, Any]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as res:
        body = json.loads(res.read())
    return time.perf_counter() - t0, body


def _memory(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            name, value = line.split(":")
            out[name] = int(value.split()[0]) / 1024
    return out


def _cpu(pid: int) -> float:
    """The process's CPU seconds (user + system): what the machine's other load does not inflate."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(n: int, root: Path) -> dict[str, Any]:
    run = root / f"run-{n}"
    t0 = time.perf_counter()
    path = write_run(run, n)
    written = time.perf_counter() - t0
    port = _free_port()
    code = "import sys; from verigym._http_server import serve_forever; from verigym.view import create_app; serve_forever(create_app(sys.argv[1]), '127.0.0.1', int(sys.argv[2]))"
    proc = subprocess.Popen([sys.executable, "-c", code, str(root), str(port)])
    base = f"http://127.0.0.1:{port}/api"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/favicon.ico", timeout=5).close()
                break
            except OSError:
                time.sleep(0.1)
        idle = _memory(proc.pid)
        rid = run.name
        cpu0 = _cpu(proc.pid)
        t_list, _ = _get(f"{base}/runs")
        t_run, info = _get(f"{base}/run?run={rid}")
        t_page, page = _get(f"{base}/samples?run={rid}&limit=50")
        first_rows = len(page["rows"])
        t0 = time.perf_counter()
        while page["indexing"]:  # the page shows the rows so far and asks again, as the browser does
            time.sleep(0.05)
            page = _get(f"{base}/samples?run={rid}&limit=50")[1]
        t_whole = t_run + t_page + time.perf_counter() - t0
        cpu_index = _cpu(proc.pid) - cpu0
        out: dict[str, Any] = {
            "samples": n,
            "file_mb": round(path.stat().st_size / 2**20, 1),
            "write_s": round(written, 1),
            "open_s": round(t_run + t_page, 3),
            "run_list_s": round(t_list, 3),
            "first_page_rows": first_rows,
            "indexed_s": round(t_whole, 3),
            "indexed_cpu_s": round(cpu_index, 3),
            "rss_idle_mb": round(idle["VmRSS"], 1),
        }
        last = max(0, page["matched"] - 50)
        filters = {
            "reward_max=0": "reward_max=0",
            "grader format >= 1": "grader=format&grader_min=1",
            "error=any": "error=any",
            "task id contains": "task=task-0012",
            "tokens 40..50": "tokens_min=40&tokens_max=50",
            "sort by reward desc": "sort=reward&desc=1",
            "text 'needle'": "text=needle",
            "last page": f"offset={last}",
        }
        out["filters_s"] = {}
        for name, qs in filters.items():
            t, body = _get(f"{base}/samples?run={rid}&limit=50&{qs}")
            out["filters_s"][name] = {"s": round(t, 3), "matched": body["matched"]}
        t_sample, _ = _get(f"{base}/sample?run={rid}&row={n // 2}")
        out["sample_s"] = round(t_sample, 3)
        mem = _memory(proc.pid)
        out["rss_mb"] = round(mem["VmRSS"], 1)
        out["rss_peak_mb"] = round(mem["VmHWM"], 1)
        out["bad_lines"] = info.get("bad_lines")
        out["met"] = (
            out["open_s"] < 2.0
            and out["indexed_s"] < 2.0
            and all(v["s"] < 1.0 for v in out["filters_s"].values())
        )
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.sizes.split(",")]:
            r = measure(n, Path(tmp) / f"root-{n}")
            results.append(r)
            print(
                f"{n:>7} samples ({r['file_mb']} MB): run list {r['run_list_s']:.3f} s, open (first page, "
                f"{r['first_page_rows']} rows) {r['open_s']:.3f} s, whole run indexed {r['indexed_s']:.3f} s "
                f"({r['indexed_cpu_s']:.2f} s of server CPU), "
                f"a sample {r['sample_s']:.3f} s, "
                f"server RSS {r['rss_idle_mb']} MB idle -> {r['rss_mb']} MB (peak {r['rss_peak_mb']} MB)"
            )
            for name, f in r["filters_s"].items():
                print(f"          {name:<22} {f['s']:.3f} s  ({f['matched']} match)")
            print(
                f"          open and whole index < 2 s, every filter < 1 s: {'MET' if r['met'] else 'NOT MET'}"
            )
    if len(results) > 1:
        a, b = results[0], results[-1]
        per = (b["rss_mb"] - a["rss_mb"]) * 2**20 / max(1, b["samples"] - a["samples"])
        print(
            f"memory: {per:.0f} bytes per added sample ({a['rss_mb']} MB at {a['samples']}, {b['rss_mb']} MB at {b['samples']})"
        )
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
