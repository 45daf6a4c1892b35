"""`labkit course site`: what a chapter page keeps and drops, the offline guard, the output folder's safety,
and the Chinese search terms. The real chapters in a real browser: tests/browser/test_site_in_chromium.py."""

from __future__ import annotations

import json
from pathlib import Path

import altair as alt
import nbformat
import pandas as pd
import pytest

from labkit.cli import main
from labkit.course import notebooks
from labkit.errors import LabkitError

site = pytest.importorskip("labkit.course.site")
pytest.importorskip("myst_nb", reason="the site extra is not installed: pip install -e '.[site]'")
from labkit.course.sphinx_zh import SearchChinesePairs, han_pairs

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"


def _chapter() -> nbformat.NotebookNode:
    new = nbformat.v4
    return new.new_notebook(metadata={"language_info": {"name": "python", "pygments_lexer": "ipython3"}}, cells=[
        new.new_markdown_cell("# 第 9 章　测试\n\n多租户的讲解。"),
        new.new_code_cell("print('hello')", outputs=[new.new_output("stream", text="hello\n")]),
        new.new_code_cell("panel = make_panel()", metadata={"tags": ["panel"]},
                          outputs=[new.new_output("display_data", data={"text/plain": "Panel(...)"})]),
        new.new_code_cell("# BEGIN SOLUTION\nanswer = 42\n# END SOLUTION", metadata={"tags": ["answer:ch09.q1"]},
                          outputs=[new.new_output("stream", text="42\n")]),
        new.new_code_cell('check("ch09.q1", answer)', metadata={"tags": ["check:ch09.q1"]},
                          outputs=[new.new_output("stream", text="ch09.q1: ok\n")]),
    ])


def test_page_keeps_explanations_and_outputs_drops_answers_and_panels():
    page = site.page(_chapter(), "ch09_test.ipynb")
    sources = [c.source for c in page.cells]
    assert sources[0].startswith("# 第 9 章　测试\n\n{download}`下载本章实验 ch09_test.ipynb <labs/ch09_test.ipynb>`")
    assert page.cells[1].outputs[0].text == "hello\n"
    assert page.cells[2].outputs == [] and "交互面板" in sources[3] and "labs/ch09_test.ipynb" in sources[3]
    assert sources[4] == f"answer = {notebooks.PLACEHOLDER}" and page.cells[4].outputs == []
    assert page.cells[5].outputs == []
    assert "42" not in json.dumps([c.get("outputs", []) for c in page.cells]) + "".join(sources)


def test_lab_url_links_the_lab_in_a_running_jupyterlab():
    page = site.page(_chapter(), "ch09_test.ipynb", lab_url="http://127.0.0.1:8888/lab/tree/labs/")
    assert "[在 JupyterLab 中打开本章实验 ch09_test.ipynb](http://127.0.0.1:8888/lab/tree/labs/ch09_test.ipynb)" in page.cells[0].source


def test_vegalite_output_becomes_svg():
    chart = alt.Chart(pd.DataFrame({"x": [1, 2], "y": [3, 4]})).mark_line().encode(x="x", y="y")
    nb = _chapter()
    nb.cells[1].outputs = [nbformat.v4.new_output("display_data", data={
        "application/vnd.vegalite.v5+json": chart.to_dict(), "text/html": '<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>',
        "text/plain": "alt.Chart(...)"})]
    data = site.page(nb, "ch09_test.ipynb").cells[1].outputs[0].data
    assert sorted(data) == ["image/svg+xml", "text/plain"] and data["image/svg+xml"].lstrip().startswith("<svg")


@pytest.mark.parametrize(("where", "text"), [
    ("markdown", "图：![架构](https://example.org/arch.png)"),
    ("html", '<div><script src="https://cdn.jsdelivr.net/npm/vega@5"></script></div>'),
    ("html", "<link rel='stylesheet' href='//fonts.googleapis.com/css'>"),
])
def test_anything_that_would_load_from_another_host_is_refused(where, text):
    nb = _chapter()
    if where == "markdown":
        nb.cells[0].source += "\n" + text
    else:
        nb.cells[1].outputs = [nbformat.v4.new_output("display_data", data={"text/html": text})]
    with pytest.raises(LabkitError, match=f"ch09_test.ipynb cell {0 if where == 'markdown' else 1}: refers to another host"):
        site.page(nb, "ch09_test.ipynb")


def test_han_text_is_indexed_as_character_pairs():
    assert han_pairs("多租户") == ["多租", "租户"] and han_pairs("卡") == []
    assert SearchChinesePairs({}).split("多租户AI训练：volcano-shipped 调度") == [
        "多租", "租户", "AI", "训练", "volcano", "shipped", "调度"]


@pytest.fixture
def one_chapter(tmp_path):
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    nbformat.write(_chapter(), solutions / "ch09_test.ipynb")
    return solutions


def test_site_builds_and_rebuilds_into_its_folder_but_never_over_other_files(one_chapter, tmp_path, capsys):
    out = tmp_path / "book"
    assert main(["course", "site", "--solutions", str(one_chapter), "-o", str(out)]) == 0
    html = (out / "ch09_test.html").read_text(encoding="utf-8")
    assert "hello" in html and "ch09.q1: ok" not in html
    lab = next((out / "_downloads").glob("*/ch09_test.ipynb"))
    source = nbformat.read(one_chapter / "ch09_test.ipynb", as_version=4)
    assert nbformat.read(lab, as_version=4) == notebooks.student_version(source)
    index = (out / "searchindex.js").read_text(encoding="utf-8")
    assert json.dumps("租户") in index and json.dumps("多租户") not in index
    assert main(["course", "site", "--solutions", str(one_chapter), "-o", str(out)]) == 0  # an earlier site: replaced

    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("mine")
    capsys.readouterr()
    assert main(["course", "site", "--solutions", str(one_chapter), "-o", str(mine)]) == 2
    assert "not empty and not a site written by labkit course site" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["todo.txt"] and (mine / "todo.txt").read_text() == "mine"


def test_site_needs_an_output_folder(capsys):
    assert main(["course", "site", "--solutions", str(SOLUTIONS)]) == 2
    assert "give the site's folder with -o DIR" in capsys.readouterr().err


def test_a_missing_site_tool_is_named_with_the_extra_that_installs_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(site.NEEDS, "labkit_no_such_sphinx_theme", "no-such-sphinx-theme")
    assert main(["course", "site", "--solutions", str(SOLUTIONS), "-o", str(tmp_path / "book")]) == 2
    assert "needs no-such-sphinx-theme: pip install 'labkit[site]'" in capsys.readouterr().err
    assert not (tmp_path / "book").exists()
