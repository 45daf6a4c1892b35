"""A real browser: JupyterLab on 127.0.0.1 runs `panel.ipynb`, Playwright moves the panel's slider in
Debian's chromium, and the chart and the metrics table must change. Requests to any other host are
refused, which proves the charts render offline (no CDN). The screenshot is saved in the test's tmp dir.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import chromium
import pytest

NOTEBOOK = Path(__file__).with_name("panel.ipynb")
START_TIMEOUT = 90.0
STEP_TIMEOUT_MS = 60_000

sync_api = chromium.sync_api()


@pytest.fixture
def jupyterlab(tmp_path):
    """JupyterLab serving a copy of the notebook on a free loopback port, with its own config dirs; always stopped."""
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    config = tmp_path / "config"
    (config / "labconfig").mkdir(parents=True)
    # no news/update pop-up over the notebook (and no request for them)
    (config / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    port, token = chromium.free_port(), os.urandom(16).hex()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "IPYTHONDIR": str(tmp_path / "ipython")}
    log = (tmp_path / "jupyterlab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         f"--LabApp.user_settings_dir={tmp_path / 'settings'}", f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.extension_manager=readonly"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        chromium.wait_serving(f"{base}/api/status?token={token}", server, START_TIMEOUT,
                              lambda: f"JupyterLab did not start: {(tmp_path / 'jupyterlab.log').read_text()[-2000:]}")
        yield f"{base}/lab?token={token}"
    finally:
        chromium.stop(server)
        log.close()


def _run_all(page, chart) -> None:
    """Run > Run All Cells once the kernel is idle, until the panel's chart shows; accept JupyterLab's
    "Select Kernel" dialog (python3) whenever it asks, and ask again if a run was swallowed."""
    dialog = page.locator(".jp-Dialog .jp-mod-accept")
    idle = page.get_by_text(re.compile(r"\| Idle$"))
    deadline, asked = time.monotonic() + STEP_TIMEOUT_MS / 1000, -math.inf
    while time.monotonic() < deadline:
        if chart.count():
            return
        if dialog.count():
            dialog.first.click()
        elif idle.count() and time.monotonic() - asked > 20:
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).click()
            asked = time.monotonic()
        page.wait_for_timeout(500)
    pytest.fail(f"the notebook did not show the panel's chart (Run All asked: {math.isfinite(asked)})")


def test_slider_reruns_the_engine_and_redraws(jupyterlab, tmp_path):
    with chromium.local_page(sync_api, tmp_path / "profile", {"width": 1500, "height": 1100},
                             STEP_TIMEOUT_MS) as (page, local_only):
        try:
            page.goto(jupyterlab)
            # open the notebook once, from the file browser (a /lab/tree/ URL can open it twice, racing two kernels)
            page.locator(".jp-DirListing-itemText", has_text=NOTEBOOK.name).dblclick()
            page.wait_for_selector(".jp-NotebookPanel .jp-Cell")
            chart = page.locator(".labkit-chart svg").first
            table = page.locator(".labkit-table table").first
            _run_all(page, chart)
            table.wait_for()
            page.wait_for_selector(".jp-RenderedSVG")  # the plain chart cell: altair's svg renderer, no script
            before_chart, before_table = chart.inner_html(), table.inner_text()
            page.screenshot(path=str(tmp_path / "panel-before.png"), full_page=True)

            handle = page.locator(".widget-slider .noUi-handle").first
            handle.focus()
            handle.press("ArrowLeft")  # capability 16 -> 12 GPUs for queue a
            page.wait_for_function(
                "([old]) => { const t = document.querySelector('.labkit-table table');"
                " return t && t.innerText !== old; }", arg=[before_table])
            page.wait_for_function(
                "([old]) => { const s = document.querySelector('.labkit-chart svg');"
                " return s && s.innerHTML !== old; }", arg=[before_chart])
            after_table = table.inner_text()
            slider_value = page.locator(".widget-slider .widget-readout").first.inner_text()
            page.screenshot(path=str(tmp_path / "panel.png"), full_page=True)
        except BaseException:  # pytest.fail too: keep the page for the failure report
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
    print(f"screenshots: {tmp_path / 'panel-before.png'} {tmp_path / 'panel.png'}")
    assert slider_value.strip() == "12"
    assert after_table != before_table
    assert not local_only.refused, f"the page asked for hosts other than 127.0.0.1: {local_only.refused}"
