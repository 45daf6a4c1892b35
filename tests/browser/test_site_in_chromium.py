"""The course site in a real browser: `labkit course site` renders solutions/, a loopback HTTP server
serves it, and Debian's chromium (Playwright) reads a chapter, follows its lab link and searches in
Chinese. Every request is recorded; any to a host other than 127.0.0.1 is refused and fails the test
(no CDN, no web font, no analytics). The chapter's screenshot is saved in the test's tmp dir.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlparse

import chromium
import nbformat
import pytest

from labkit.cli import main
from labkit.course import notebooks

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
STEP_TIMEOUT_MS = 60_000

sync_api = chromium.sync_api()
pytest.importorskip("myst_nb", reason="the site extra is not installed: pip install -e '.[site]'")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built from solutions/, served on a free loopback port; yields (base URL, folder)."""
    out = tmp_path_factory.mktemp("site") / "book"
    assert main(["course", "site", "--solutions", str(SOLUTIONS), "-o", str(out)]) == 0
    port = chromium.free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        chromium.wait_serving(f"{base}/index.html", server, 30, lambda: "the loopback HTTP server did not start")
        yield base, out
    finally:
        chromium.stop(server)


@pytest.fixture
def browser(tmp_path):
    """A chromium page that records every request and refuses any that leaves 127.0.0.1."""
    with chromium.local_page(sync_api, tmp_path / "profile", {"width": 1400, "height": 1000},
                             STEP_TIMEOUT_MS) as (page, local_only):
        yield page, local_only.requests
    assert local_only.requests, "no request was recorded"
    assert not local_only.refused, f"the site asked for hosts other than 127.0.0.1: {local_only.refused}"


def _solution_lines(nb) -> list[str]:
    """The answer lines between BEGIN/END SOLUTION markers that the lab does not have (the site must not
    show them), at least 8 characters long so that they cannot occur by chance."""
    lab = "\n".join(c.source for c in notebooks.student_version(nb).cells)
    lines = []
    for cell in nb.cells:
        if cell.cell_type == "code" and notebooks.BEGIN in cell.source:
            region = cell.source.split(notebooks.BEGIN, 1)[1].split(notebooks.END, 1)[0]
            lines += [line.strip() for line in region.splitlines() if len(line.strip()) >= 8 and line.strip() not in lab]
    assert lines, "no answer lines to look for"
    return lines


def _unique_phrase(chapter: Path) -> str:
    """A run of 6+ Chinese characters from the chapter's text that no other chapter's text holds."""
    def text(path):
        nb = nbformat.read(path, as_version=4)
        return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    others = [text(p) for p in notebooks.chapters(SOLUTIONS) if p != chapter]
    for run in re.findall(r"[\u4e00-\u9fff]{6,}", text(chapter)):
        if not any(run in other for other in others):
            return run
    pytest.skip(f"{chapter.name} has no phrase of its own to search for")


def test_chapter_page_shows_outputs_not_answers_and_links_the_lab(site, browser, tmp_path):
    base, _ = site
    page, requests = browser
    chapter = notebooks.chapters(SOLUTIONS)[0]
    nb = nbformat.read(chapter, as_version=4)
    page.goto(f"{base}/index.html")
    for path in notebooks.chapters(SOLUTIONS):
        assert page.locator(f'a[href="{path.stem}.html"]').count(), f"index.html has no link to {path.stem}"
    page.goto(f"{base}/{chapter.stem}.html")
    page.wait_for_load_state("networkidle")
    charts = page.locator("img[src$='.svg']")
    assert charts.count(), "no chart (SVG output) on the chapter page"
    assert page.evaluate("() => [...document.querySelectorAll('img')].every(i => i.complete && i.naturalWidth > 0)")
    page.screenshot(path=str(tmp_path / f"{chapter.stem}.png"), full_page=True)
    print(f"screenshot: {tmp_path / f'{chapter.stem}.png'}")

    text = page.inner_text("main")
    assert notebooks.PLACEHOLDER.split("#")[1].strip() in text  # the exercises' "在此作答" placeholders
    for line in _solution_lines(nb):
        assert line not in text, f"the answer line {line!r} is on the page"
    assert not re.search(r"ch\d\d\.q\d+: ok", text), "a check's verdict (computed from the answer) is on the page"
    stream = next(o.text for c in nb.cells if c.cell_type == "code" and "check:" not in str(c.metadata.get("tags"))
                  for o in c.get("outputs", []) if o.output_type == "stream")
    assert stream.splitlines()[0].strip() in text, "the experiments' printed output is missing"

    link = page.locator(f'a[href$="{chapter.name}"]').first
    with urllib.request.urlopen(f"{base}/{link.get_attribute('href')}") as served:
        lab = json.loads(served.read())
    assert lab == json.loads(nbformat.writes(notebooks.student_version(nb)))
    assert all(urlparse(u).hostname == "127.0.0.1" for u in requests if not u.startswith(("data:", "blob:")))


@pytest.mark.parametrize("query", ["多租户", "phrase"])
def test_chinese_full_text_search(site, browser, query):
    base, _ = site
    page, _ = browser
    chapters = notebooks.chapters(SOLUTIONS)
    if query == "phrase":
        query = _unique_phrase(chapters[0])
        expected = {chapters[0].stem}
    else:
        expected = {p.stem for p in chapters
                    if query in "".join(c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == "markdown")}
    page.goto(f"{base}/search.html?q={quote(query)}")
    # Sphinx writes the summary line ("found N page(s)" or "did not match") once the search has finished
    page.wait_for_function("() => document.querySelector('#search-results .search-summary')?.innerText")
    found = {Path(urlparse(href).path).stem for href in
             page.eval_on_selector_all("#search-results ul.search li a", "as => as.map(a => a.getAttribute('href'))")}
    assert expected <= found, f"searching {query!r} found {sorted(found)}, not all of {sorted(expected)}"
