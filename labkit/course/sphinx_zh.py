"""A Sphinx extension for the course site: Chinese full-text search by character pairs.

Sphinx's own Chinese search indexes jieba's words and looks a query up as one term, so 多租户 (jieba:
多 + 租户) or 大作业饥饿 find nothing. Here every run of Han characters is indexed as its overlapping
character pairs (多租, 租户), and the browser splits the query the same way; Sphinx requires every term
of a query, so a phrase finds the pages that hold all of its pairs. Latin words are indexed as Sphinx does.
"""

from __future__ import annotations

import re

import snowballstemmer
from sphinx.application import Sphinx
from sphinx.search import SearchLanguage
from sphinx.search.zh import SearchChinese

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUNS = re.compile(f"[{_HAN}]+|[a-zA-Z0-9_]+")
"""Han runs and Latin words: what both the index and the query splitter (below, in JavaScript) keep."""


def han_pairs(run: str) -> list[str]:
    """多租户 -> [多租, 租户]; a lone character gives none (Sphinx indexes no one-letter term either)."""
    return [run[i:i + 2] for i in range(len(run) - 1)]


class SearchChinesePairs(SearchChinese):
    """Sphinx's Chinese search language with Han character pairs instead of jieba's words."""

    # Sphinx 9.0 names the browser's stemmer class after language_name ("ChineseStemmer", which does not
    # exist, so search stops with a ReferenceError; sphinx-doc/sphinx#14416 fixes it). Latin words in
    # Chinese pages are stemmed as English, by EnglishStemmer.
    language_name = "English"

    js_splitter_code = """
function splitQuery(query) {
  const terms = [];
  for (const run of query.match(/[HAN]+|[a-zA-Z0-9_]+/gu) || []) {
    if (!/^[HAN]/u.test(run)) { terms.push(run); continue; }
    for (let i = 0; i + 1 < run.length; i++) terms.push(run.slice(i, i + 2));
  }
  return terms;
}
""".replace("HAN", _HAN.encode("unicode_escape").decode())

    def __init__(self, options: dict[str, str]) -> None:
        SearchLanguage.__init__(self, options)  # not SearchChinese's, which loads jieba's dictionary when installed
        self.stemmer = snowballstemmer.stemmer("english")
        self.latin_terms: set[str] = set()  # what `stem` leaves unstemmed (a list shared by the class before Sphinx 8)

    def split(self, input: str) -> list[str]:
        terms: list[str] = []
        for run in _RUNS.findall(input):
            if run[0].isascii():
                self.latin_terms.add(run)
                terms.append(run)
            else:
                terms += han_pairs(run)
        return terms


def setup(app: Sphinx) -> dict[str, object]:
    app.add_search_language(SearchChinesePairs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
