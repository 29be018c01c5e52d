"""``verigym view`` in a real browser: headless Chromium (Debian's ``chromium`` package) driven by Playwright.

One browser for the module. Each test loads a page as a user would and checks what shows: the run list
refreshing while a run is written, a filter, a sample (tool calls, graders, shaded tokens), a model's
``<script>`` shown as text and never run, two runs side by side filtered to pass -> fail, a training
step's groups. Each page's screenshot is taken as it is checked; with ``VERIGYM_SCREENSHOTS=DIR`` they
are written to DIR (``VERIGYM_SCREENSHOTS=docs/img`` refreshes the README's), else to a temporary folder.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from view_runs import TASKS, write_eval

CHROMIUM = os.environ.get("VERIGYM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
VIEWPORT = {"width": 1100, "height": 640}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"the viewer's browser tests need Debian's chromium at {CHROMIUM}: run 'sudo apt-get install "
            "chromium' (make setup installs it), or set VERIGYM_CHROMIUM to a Chromium binary",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, viewer: str) -> Iterator[Any]:
    """A fresh page; fails the test on any script error or blocked inline code (CSP) it logs."""
    context = browser.new_context(viewport=VIEWPORT, base_url=viewer)
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    p.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    p.set_default_timeout(15_000)
    yield p
    context.close()
    assert errors == []


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = os.environ.get("VERIGYM_SCREENSHOTS")
    folder = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shot(page: Any, folder: Path, name: str, *, full: bool = False) -> None:
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    assert path.stat().st_size > 5_000


def test_run_list_refreshes_while_a_run_is_written(page: Any, runs_dir: Path, shots: Path) -> None:
    page.goto("/")
    rows = page.locator("#runs tbody tr")
    rows.first.wait_for()
    assert rows.count() == 5
    assert page.locator('#runs tr[data-run="train"] td').nth(2).inner_text() == "train"
    _shot(page, shots, "view-runs")
    live = runs_dir / "zz-live"
    try:  # a run being written: no summary yet, lines arriving
        src = (runs_dir / "evals" / "before" / "results.jsonl").read_bytes().splitlines(keepends=True)
        write_eval(live, [], runs_dir / "none", summary=False)
        (live / "results.jsonl").write_bytes(b"".join(src[:2]))
        row = page.locator('#runs tr[data-run="zz-live"]')
        row.wait_for()
        assert "(live)" in row.inner_text()
        page.wait_for_function(
            "() => document.querySelector('#runs tr[data-run=\"zz-live\"] td:nth-child(7)').textContent === '2'"
        )
        with (live / "results.jsonl").open("ab") as fh:
            fh.write(b"".join(src[2:7]))
        page.wait_for_function(
            "() => document.querySelector('#runs tr[data-run=\"zz-live\"] td:nth-child(7)').textContent === '7'"
        )
    finally:
        shutil.rmtree(live, ignore_errors=True)


def test_filter_then_open_a_sample(page: Any, shots: Path) -> None:
    page.goto("/#/run/evals%2Fbefore")
    page.locator("#matched").filter(has_text="24 of 24").wait_for()
    page.fill("#filters input[name=reward_max]", "0")
    page.click("#filters button[type=submit]")
    page.locator("#matched").filter(has_text="8 of 24 samples match").wait_for()
    tasks = page.locator("#samples tbody tr td:first-child").all_inner_texts()
    assert sorted(set(tasks)) == ["calc-10", "calc-11", "calc-8", "calc-9"]
    page.select_option("#filters select[name=grader]", "correct")
    page.fill("#filters input[name=reward_max]", "")
    page.fill("#filters input[name=grader_min]", "1")
    page.fill("#filters input[name=task]", "calc-1")
    page.click("#filters button[type=submit]")
    page.locator("#matched").filter(has_text="2 of 24").wait_for()  # calc-1 passes; calc-10, calc-11 fail
    page.click("#filters button[type=button]")  # Clear
    page.locator("#matched").filter(has_text="24 of 24").wait_for()
    page.click("#samples th:has-text('seconds')")  # sort by duration: the slowest task last
    page.locator("#samples tbody tr").first.filter(has_text="calc-0").wait_for()
    _shot(page, shots, "view-samples")
    page.locator("#samples tbody tr").first.click()
    page.locator("#conversation").wait_for()
    text = page.locator("#conversation").inner_text()
    assert "You are a calculator agent." in text and "What is 0 * 7?" in text
    assert '→ calc({"expr":"0*7"})' in text
    assert page.locator("#grades").inner_text().count("expected 0, got 0") == 1
    assert "0 * 7 = 0" in text
    assert page.locator("#conversation span.tok").count() >= 2  # both completions, token by token
    assert "calc" in page.locator("text=Tools offered >> xpath=following-sibling::*[1]").inner_text()
    _shot(page, shots, "view-sample", full=True)


def test_a_models_script_is_shown_as_text(page: Any, viewer: str) -> None:
    import urllib.request

    with urllib.request.urlopen(f"{viewer}/api/samples?run=evals/before&text=__pwned", timeout=30) as res:
        row = json.loads(res.read())["rows"][0]["row"]
    page.goto(f"/#/sample/evals%2Fbefore/{row}")
    page.locator("#conversation span.tok").first.wait_for()
    page.uncheck("text=per-token logprobs shaded >> input")  # the reply as one text, not token by token
    assert '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">the answer is 7' in (
        page.locator("#conversation").inner_text()
    )
    assert page.evaluate("() => window.__pwned") is None
    assert page.evaluate("() => document.querySelectorAll('#main script, #main img').length") == 0
    assert "got <script>" in page.locator("#grades").inner_text()  # a grader's detail quotes it: text too


def test_two_runs_side_by_side(page: Any, shots: Path) -> None:
    page.goto("/")
    page.locator('#runs tr[data-run="evals/before"] input').check()
    page.locator('#runs tr[data-run="evals/after"] input').check()
    page.click("text=Compare the two ticked runs")
    page.locator("#compare tbody tr").first.wait_for()
    assert page.locator("#compare tbody tr").count() == len(TASKS)
    cards = page.locator(".cards").inner_text()
    assert "paired tasks\n12" in cards and "pass → fail\n4" in cards and "95% CI (paired bootstrap)" in cards
    page.click("#show button:has-text('pass → fail')")
    page.wait_for_function("() => document.querySelectorAll('#compare tbody tr').length === 4")
    assert page.locator("#compare tbody tr td:first-child").all_inner_texts() == [
        "calc-4",
        "calc-5",
        "calc-6",
        "calc-7",
    ]
    _shot(page, shots, "view-compare")
    page.locator("#compare tbody tr").first.locator("td").nth(2).locator("a").click()  # B's sample of calc-4
    page.locator("#conversation").wait_for()
    assert "What is 4 * 7?" in page.locator("#conversation").inner_text()


def test_training_curves_then_a_step(page: Any, shots: Path) -> None:
    page.goto("/#/train/train")
    chart = page.locator('.chart[data-key="reward"]')
    chart.wait_for()
    assert page.locator('.chart[data-key="eval/pass_at_1"] text').filter(has_text="SFT").count() == 1
    _shot(page, shots, "view-train")
    chart.locator('circle.step[data-step="1"]').click()
    page.locator(".group").first.wait_for()
    assert page.locator(".group").count() == 2
    head = page.locator(".group").first.locator("th").all_inner_texts()
    assert head[:3] == ["#", "reward", "advantage"] and "gap max" in head
    assert page.locator(".group").first.locator("tbody tr").count() == 4
    tip = page.locator(".group span.tok").first.get_attribute("title") or ""
    assert "sampler" in tip and "trainer" in tip
    assert page.locator("#heldout tbody tr").count() == 8  # the nearest held-out eval's kept samples
    _shot(page, shots, "view-step")
