"""The report page in headless Chromium (Debian's `chromium`, driven by Playwright).

For each example script (the seeds' examples, and the report demo with breaks and a
recompile): the page loads without console errors or requests leaving the file, and shows
every graph that was compiled (each with all its nodes) and every graph break, counted from
the compiler's raw events by tests/report_driver.py, not from the report's own records.
`make test-browser` installs what these tests need; without Chromium or Playwright they
are skipped.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("GRAPHWRIGHT_CHROMIUM", "/usr/bin/chromium")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.py")))
# Playwright's own browser download is not used: it drives the system's Chromium.
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]

if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
    pytest.skip("Chromium is not installed (make test-browser installs it)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (make test-browser)")


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        executable = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
        browser = playwright.chromium.launch(executable_path=executable, args=LAUNCH_ARGS)
        yield browser
        browser.close()


def _report_of(script: str, folder) -> tuple[str, dict]:
    page, expected = folder / "page.html", folder / "expected.json"
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "report_driver.py"), script, str(page),
                             str(expected)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return str(page), json.loads(expected.read_text())


def _open(browser, path: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = []
    page.on("console", lambda message: problems.append(f"console {message.type}: {message.text}")
            if message.type in ("error", "warning") else None)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("request", lambda request: problems.append(f"request: {request.url}")
            if not request.url.startswith("file://") else None)
    page.goto(f"file://{path}")
    page.wait_for_load_state("load")
    return page, problems


@pytest.mark.parametrize("script", EXAMPLES, ids=[os.path.basename(path) for path in EXAMPLES])
def test_page_shows_every_graph_and_break(browser, tmp_path, script):
    path, expected = _report_of(script, tmp_path)
    page, problems = _open(browser, path)
    try:
        graphs = page.locator("svg.graph")
        assert graphs.count() == len(expected["graph_nodes"])
        for index, nodes in enumerate(expected["graph_nodes"]):
            graph = graphs.nth(index)
            graph.scroll_into_view_if_needed()
            assert graph.is_visible()
            assert graph.locator("g.node").count() == nodes
            box = graph.bounding_box()
            assert box["width"] > 0 and box["height"] > 0
        breaks = page.locator("div.break")
        assert breaks.count() == len(expected["breaks"])
        shown = [breaks.nth(i).get_attribute("data-gb") for i in range(breaks.count())]
        assert sorted(shown) == sorted(expected["breaks"])
        for index in range(breaks.count()):
            assert breaks.nth(index).is_visible()
            assert "Suggested fix" in breaks.nth(index).inner_text()
        assert problems == []
    finally:
        page.close()


def test_clicking_a_node_marks_its_edges(browser, tmp_path):
    path, _ = _report_of(os.path.join(ROOT, "examples", "report_demo.py"), tmp_path)
    page, problems = _open(browser, path)
    try:
        graph = page.locator("svg.graph").first
        node = graph.locator("g.node.kind-nonstrict").first
        name = node.get_attribute("data-name")
        edges = graph.locator(f'path.edge[data-from="{name}"], path.edge[data-to="{name}"]').count()
        node.click()
        assert graph.locator("g.node.marked").count() == 1
        assert graph.locator("path.edge.marked").count() == edges > 0
        node.click()
        assert graph.locator(".marked").count() == 0
        page.locator('button[data-open="all"]').click()
        assert page.locator("details[open]").count() == page.locator("details").count()
        assert problems == []
    finally:
        page.close()
