"""`labkit course site`: the chapters as a static book (Sphinx + MyST-NB, sphinx-book-theme), offline.

A chapter's page is its solutions/ notebook with the stored outputs (the explanations and the experiments'
results), its exercises as the lab shows them (answers replaced by the placeholders, the checks' verdicts
dropped), each interactive panel replaced by a pointer to the lab, and a link to the lab at the top: the
lab notebook shipped in the site, or the same notebook in a running JupyterLab (`--lab-url`). Search is
Chinese full text (`labkit.course.sphinx_zh`). Nothing on a page comes from another host: charts are
stored as SVG, Vega-Lite outputs are rendered to SVG here, and any output or text that would load a remote
script, style sheet or image is refused with the chapter and cell named.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from ..errors import LabkitError
from . import notebooks

TITLE = "多租户 AI 训练任务调度策略与资源分配实操"
MARKER = ".labkit-site"
"""The file that marks a folder as a site this command wrote (and may therefore replace)."""
NEEDS = {"sphinx": "sphinx", "myst_nb": "myst-nb", "sphinx_book_theme": "sphinx-book-theme"}
WIDGET = "application/vnd.jupyter.widget-view+json"
_VEGALITE = re.compile(r"application/vnd\.vegalite\.v\d+\+json")
_REMOTE = re.compile(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|!\[[^\]]*\]\(\s*(?:https?:)?//""",
                     re.IGNORECASE)
_CONF = """\
project = {title!r}
language = "zh_CN"
extensions = ["myst_nb", "labkit.course.sphinx_zh"]
nb_execution_mode = "off"
exclude_patterns = ["labs"]
html_theme = "sphinx_book_theme"
html_title = {title!r}
html_theme_options = {{"show_toc_level": 2, "use_download_button": False}}
html_copy_source = False
html_show_sourcelink = False
"""


def lab_link(name: str, lab_url: str | None) -> str:
    """MyST for the link to a chapter's lab: the notebook in JupyterLab at `lab_url`, or shipped in the site."""
    if lab_url:
        return f"[在 JupyterLab 中打开本章实验 {name}]({lab_url.rstrip('/')}/{name})"
    return f"{{download}}`下载本章实验 {name} <labs/{name}>`"


def _render_vegalite(output: nbformat.NotebookNode) -> None:
    """A Vega-Lite chart (vega-embed would load its scripts from a CDN) becomes the SVG it draws."""
    import vl_convert

    for mime in [m for m in output.get("data", {}) if _VEGALITE.fullmatch(m)]:
        output.data["image/svg+xml"] = vl_convert.vegalite_to_svg(output.data.pop(mime))
        output.data.pop("text/html", None)


def _refuse_remote(text: str, where: str) -> None:
    found = _REMOTE.search(text)
    if found:
        raise LabkitError(f"{where}: refers to another host ({found.group(0)!r}); the site must work offline")


def page(nb: nbformat.NotebookNode, name: str, lab_url: str | None = None) -> nbformat.NotebookNode:
    """The chapter's page: see the module docstring."""
    out = nbformat.from_dict(nb)
    out.metadata.pop("widgets", None)
    link = lab_link(name, lab_url)
    cells = []
    for index, cell in enumerate(out.cells):
        where = f"{name} cell {index}"
        tags = cell.metadata.get("tags", [])
        cells.append(cell)
        if cell.cell_type != "code":
            _refuse_remote(cell.source, where)
            continue
        stripped = notebooks.strip_solutions(cell.source)
        if stripped != cell.source or any(t.startswith(("answer:", "check:")) for t in tags):
            cell.source, cell.outputs = stripped, []
        if "panel" in tags:
            cell.outputs = []
            cells.append(nbformat.v4.new_markdown_cell(
                f"> 上面是一个交互面板：它要在 Jupyter 里连着 Python 内核运行，网页上不显示。{link}，在 JupyterLab 里运行它。"))
        cell.outputs = [o for o in cell.outputs if WIDGET not in o.get("data", {})]
        for output in cell.outputs:
            _render_vegalite(output)
            for mime in ("text/html", "image/svg+xml", "text/markdown"):
                _refuse_remote("".join(output.get("data", {}).get(mime, "")), where)
    first = cells[0]
    if first.cell_type == "markdown" and first.source.startswith("# "):
        head, _, rest = first.source.partition("\n")
        first.source = f"{head}\n\n{link}\n{rest}"
    else:
        cells.insert(0, nbformat.v4.new_markdown_cell(link))
    out.cells = cells
    return out


def _index(chapters: list[Path]) -> str:
    toc = "\n".join(c.stem for c in chapters)
    return (f"# {TITLE}\n\n"
            "每章一页：讲解与实验结果来自参考答案笔记本（solutions/）的输出，练习只给题目，不给答案。"
            "每章开头有该章实验（lab）的链接：下载后在 JupyterLab 里运行、作答、检查。\n\n"
            f"```{{toctree}}\n:maxdepth: 1\n:caption: 章节\n\n{toc}\n```\n")


def _check_tools() -> None:
    missing = [dist for module, dist in NEEDS.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise LabkitError(f"labkit course site needs {', '.join(missing)}: pip install 'labkit[site]'")


def _prepare_output(out: Path) -> None:
    """Refuse a folder that holds anything but a site this command wrote (nothing the user wrote is lost)."""
    if out.exists() and not out.is_dir():
        raise LabkitError(f"{out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise LabkitError(f"{out}: not empty and not a site written by labkit course site; give a new or empty folder")


def build(solutions: Path, out: Path, lab_url: str | None = None) -> list[Path]:
    """Render the chapters of `solutions` into the static site `out`; return the chapter pages written."""
    _check_tools()
    _prepare_output(out)
    chapters = notebooks.chapters(solutions)
    if not chapters:
        raise LabkitError(f"no chapter sources solutions/chNN_*.ipynb in {solutions}")
    with tempfile.TemporaryDirectory(prefix="labkit-site-") as tmp:
        src, html = Path(tmp) / "src", Path(tmp) / "html"
        (src / "labs").mkdir(parents=True)
        (src / "conf.py").write_text(_CONF.format(title=TITLE), encoding="utf-8")
        (src / "index.md").write_text(_index(chapters), encoding="utf-8")
        for chapter in chapters:
            nb = nbformat.read(chapter, as_version=4)
            nbformat.write(page(nb, chapter.name, lab_url), src / chapter.name)
            nbformat.write(notebooks.student_version(nb), src / "labs" / chapter.name)
        print(f"building the site from {len(chapters)} chapter(s) with Sphinx ...", file=sys.stderr, flush=True)
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-E", "-d", str(Path(tmp) / "doctrees"),
                               str(src), str(html)], capture_output=True, text=True, env=env, check=False)
        for line in done.stderr.splitlines():
            print(line, file=sys.stderr)
        if done.returncode != 0:
            raise LabkitError(f"sphinx failed (exit {done.returncode}); its messages are above")
        (html / MARKER).write_text(json.dumps({"solutions": str(solutions.resolve()), "lab_url": lab_url}) + "\n")
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(html, out)
    return [out / f"{chapter.stem}.html" for chapter in chapters]
