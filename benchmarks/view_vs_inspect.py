"""``verigym view`` against ``inspect view`` on the same samples, in the same headless browser (issue 41 item 3).

The run of ``benchmarks/view_scale.py`` (``--samples`` records) is written once as verigym's
``results.jsonl`` and once as an inspect ``.eval`` log (``_inspect_log_side.py``, run in the bench venv,
where ``make bench-venv`` and ``pip install inspect-ai`` put inspect-ai). Each viewer runs as its own
process on 127.0.0.1 (``verigym view DIR``; ``inspect view --log-dir DIR``), and Debian's chromium,
driven by Playwright, opens it fresh:

- **open**: from navigation until the first sample row of the run is on screen (verigym: the run's
  sample table; inspect: its sample list, which it opens by itself for a folder of one log);
- **server RSS** after the open (``VmRSS``) and its peak (``VmHWM``), from ``/proc``;
- **page JS heap** after the open (Chrome's ``JSHeapUsedSize``): what the browser holds for the run.

    python benchmarks/view_vs_inspect.py [--samples 100000] [--json]

Each side is opened ``--repeat`` times (a fresh server each time); the median is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCH_PY = HERE.parent / ".bench" / "venv" / "bin"
sys.path.insert(0, str(HERE))

from view_scale import _free_port, _memory, write_run  # noqa: E402  (the same port and /proc readers)

CHROMIUM = "/usr/bin/chromium"


def _wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}) before answering {url}")
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer in {timeout_s} s")


def _open(browser: Any, url: str, row_selector: str) -> tuple[float, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    t0 = time.perf_counter()
    page.goto(url)
    page.locator(row_selector).first.wait_for(state="visible", timeout=600_000)
    elapsed = time.perf_counter() - t0
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    context.close()
    return elapsed, metrics.get("JSHeapUsedSize", 0.0) / 2**20


def measure(side: str, cmd: list[str], url: str, selector: str, browser: Any, repeat: int) -> dict[str, Any]:
    opens, heaps, rss, peak = [], [], [], []
    for _ in range(repeat):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_http(url.split("#")[0], proc)
            seconds, heap = _open(browser, url, selector)
            mem = _memory(proc.pid)
            opens.append(seconds)
            heaps.append(heap)
            rss.append(mem["VmRSS"])
            peak.append(mem["VmHWM"])
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return {
        "side": side,
        "open_s": round(statistics.median(opens), 2),
        "open_s_all": [round(x, 2) for x in opens],
        "server_rss_mb": round(statistics.median(rss), 1),
        "server_peak_mb": round(statistics.median(peak), 1),
        "page_heap_mb": round(statistics.median(heaps), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not (BENCH_PY / "inspect").is_file():
        sys.exit(
            f"no inspect-ai in {BENCH_PY.parent}: make bench-venv, then {BENCH_PY}/pip install inspect-ai"
        )
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results = write_run(root / "verigym" / "run", args.samples)
        logs = root / "inspect"
        logs.mkdir()
        t0 = time.perf_counter()
        subprocess.run(
            [
                str(BENCH_PY / "python"),
                str(HERE / "_inspect_log_side.py"),
                str(results),
                str(logs / "2026-11-28T00-00-00_bench_run.eval"),
            ],
            check=True,
        )
        print(f"wrote both logs ({time.perf_counter() - t0:.0f} s for the inspect one)")
        out = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
            port = _free_port()
            out.append(
                measure(
                    "verigym view",
                    [sys.executable, "-m", "verigym", "view", str(root / "verigym"), "--port", str(port)],
                    f"http://127.0.0.1:{port}/#/run/run",
                    "#samples tbody tr",
                    browser,
                    args.repeat,
                )
            )
            port = _free_port()
            out.append(
                measure(
                    "inspect view",
                    [str(BENCH_PY / "inspect"), "view", "--log-dir", str(logs), "--port", str(port)],
                    f"http://127.0.0.1:{port}/",
                    ".sample-input",
                    browser,
                    args.repeat,
                )
            )
            browser.close()
    for r in out:
        print(
            f"{r['side']:<13} {args.samples} samples: open {r['open_s']:.2f} s (runs {r['open_s_all']}), server RSS "
            f"{r['server_rss_mb']} MB (peak {r['server_peak_mb']} MB), page JS heap {r['page_heap_mb']} MB"
        )
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
