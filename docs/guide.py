"""The user guide part of the documentation site: docs/*.md (and README.md as the home page) as HTML pages.

`build_guide(out, api_names)` renders every page of `GUIDE` with markdown2
(pdoc's own Markdown library, so the docs extra needs nothing more): a
sidebar with every page in order, the current page's sections and a link to
the API reference; previous/next links under each page; a search box over
the guide's sections and the API's public names (an index in
`search-index.js`, loaded by a script tag so that it works from `file://`).
Links between the pages (`compile.md#options`, `docs/tracing.md`) become
links between the HTML pages, and images are copied. It returns the
problems it found, which docs/build_api.py treats as errors: a link to a
page, file or section that does not exist, a docs page missing from `GUIDE`
(it would be unreachable), a page without a title.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: The guide's pages in reading order: (source, title in the sidebar or None for the page's own title).
GUIDE = [
    ("README.md", "Overview"),
    ("docs/tracing.md", None),
    ("docs/differentiation.md", None),
    ("docs/control-flow.md", None),
    ("docs/simplify.md", None),
    ("docs/compile.md", None),
    ("docs/vmath.md", None),
    ("docs/checkpointing.md", None),
    ("docs/training.md", None),
    ("docs/scipy.md", None),
    ("docs/linalg.md", None),
    ("docs/complex.md", None),
    ("docs/fft.md", None),
    ("docs/visualization.md", None),
    ("docs/debugging.md", None),
    ("docs/distributed.md", None),
    ("docs/benchmarks.md", None),
    ("docs/reliability.md", None),
    ("docs/internals.md", None),
    ("docs/api.md", None),
]

_EXTRAS = ["fenced-code-blocks", "tables", "header-ids", "code-friendly", "cuddled-lists", "toc"]


def page_name(src: str) -> str:
    """The HTML file of a guide source: README.md -> index.html, docs/x.md -> x.html."""
    return "index.html" if src == "README.md" else Path(src).stem + ".html"


def _title(text: str) -> str | None:
    m = re.search(r"^# (.+)$", text, re.M)
    return m.group(1).strip() if m else None


def _plain(s: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", s))


class _Page:
    def __init__(self, src: str, nav_title: str | None) -> None:
        self.src = src
        self.path = ROOT / src
        self.text = self.path.read_text(encoding="utf-8")
        self.title = _title(self.text)
        self.nav = nav_title or re.sub(r"[`*]", "", (self.title or src).split(":")[0])
        self.name = page_name(src)
        self.html = ""
        self.toc = ""
        self.ids: set[str] = set()


def _render(page: _Page) -> None:
    import markdown2

    body = markdown2.markdown(page.text, extras=_EXTRAS)
    page.html = str(body)
    page.ids = set(re.findall(r'\bid="([^"]+)"', page.html))
    # the sidebar shows the page's sections (its h2s)
    page.toc = "".join(f'<li><a href="#{i}">{t}</a></li>'
                       for i, t in re.findall(r'<h2 id="([^"]+)">(.*?)</h2>', page.html))


def _sections(page: _Page) -> list[dict]:
    """Search entries: one per heading, with the plain text under it (cut short)."""
    out = []
    parts = re.split(r'(<h[1-3] id="[^"]+">.*?</h[1-3]>)', page.html)
    head, anchor = page.title or page.nav, ""
    for part in parts:
        m = re.match(r'<h[1-3] id="([^"]+)">(.*?)</h[1-3]>', part)
        if m:
            anchor, head = m.group(1), _plain(m.group(2))
            continue
        text = re.sub(r"\s+", " ", _plain(part)).strip()
        if text or anchor:
            out.append({"page": page.nav, "title": head, "url": page.name + (f"#{anchor}" if anchor else ""),
                        "text": text[:600]})
    return out


def _fix_links(page: _Page, pages: dict[str, _Page], out: Path, problems: list[str]) -> None:
    """Point links between guide sources at the HTML pages; copy images; note broken targets."""
    base = page.path.parent

    def fix(m: re.Match) -> str:
        attr, target = m.group(1), html.unescape(m.group(2))
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
            return m.group(0)  # http(s), mailto: left alone
        path, _, frag = target.partition("#")
        if not path:  # a section of this page
            if frag and frag not in page.ids:
                problems.append(f"{page.src}: link to a missing section #{frag}")
            return m.group(0)
        dest = (base / path).resolve()
        rel = os.path.relpath(dest, ROOT).replace(os.sep, "/")
        if rel in pages:
            to = pages[rel]
            if frag and frag not in to.ids:
                problems.append(f"{page.src}: link to a missing section {rel}#{frag}")
            return f'{attr}="{to.name}{"#" + frag if frag else ""}"'
        if not dest.exists():
            problems.append(f"{page.src}: link to a missing file {target}")
            return m.group(0)
        if dest.suffix.lower() in (".png", ".svg", ".jpg", ".jpeg", ".gif") and attr == "src":
            to_file = out / "img" / dest.name
            to_file.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(dest, to_file)
            return f'{attr}="img/{dest.name}"'
        problems.append(f"{page.src}: link to {target}, which is not part of the site (a guide page or an image)")
        return m.group(0)

    page.html = re.sub(r'\b(href|src)="([^"]*)"', fix, page.html)


_CSS = """
body { margin: 0; font: 16px/1.55 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1d; display: flex; }
nav { width: 17rem; flex: none; height: 100vh; position: sticky; top: 0; overflow: auto; padding: 1rem;
  box-sizing: border-box; background: #f6f6f6; border-right: 1px solid #ddd; font-size: 14px; }
nav h2 { font-size: 15px; margin: 1rem 0 .3rem; } nav ul { padding-left: 1.1rem; margin: .2rem 0; }
nav li.current > a { font-weight: 600; color: #000; } nav a { color: #1a5fb4; text-decoration: none; }
nav input { width: 100%; box-sizing: border-box; padding: 4px 6px; font-size: 14px; }
#sg-search-results { font-size: 13px; } #sg-search-results a { display: block; margin: .35rem 0; overflow-wrap: anywhere; }
#sg-search-results small { color: #666; display: block; }
main { flex: 1; min-width: 0; max-width: 56rem; padding: 1rem 2.5rem 4rem; }
pre { background: #f6f8fa; padding: .7rem 1rem; overflow: auto; border-radius: 4px; font-size: 14px; line-height: 1.4; }
code { font-size: 0.92em; } p code, li code, td code { background: #f0f0f0; padding: 0 .2em; border-radius: 3px; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 14px; display: block; overflow: auto; }
th, td { border: 1px solid #ccc; padding: .25rem .5rem; text-align: left; vertical-align: top; }
img { max-width: 100%; } .sg-pager { display: flex; justify-content: space-between; margin-top: 3rem;
  border-top: 1px solid #ddd; padding-top: 1rem; }
"""

_SEARCH_JS = """(function () {
  var box = document.getElementById("sg-search"), res = document.getElementById("sg-search-results");
  var I = window.SG_SEARCH_INDEX || [];
  function run() {
    var q = box.value.trim().toLowerCase(), terms = q.split(/\\s+/).filter(Boolean), hits = [];
    res.textContent = "";
    if (!terms.length) return;
    for (var i = 0; i < I.length && hits.length < 40; i++) {
      var e = I[i], t = e.title.toLowerCase(), all = t + " " + e.text.toLowerCase(), ok = true;
      for (var j = 0; j < terms.length; j++) if (all.indexOf(terms[j]) < 0) { ok = false; break; }
      if (ok) hits.push([t.indexOf(terms[0]) >= 0 ? 0 : 1, i]);
    }
    hits.sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
    res.dataset.hits = hits.length;
    hits.forEach(function (h) {
      var e = I[h[1]], a = document.createElement("a"), s = document.createElement("small");
      a.href = e.url; a.textContent = e.title; s.textContent = e.page; a.appendChild(s); res.appendChild(a);
    });
  }
  box.addEventListener("input", run);
  var q = new URLSearchParams(location.search).get("q") || new URLSearchParams(location.hash.slice(1)).get("q");
  if (q) { box.value = q; run(); }
  document.body.dataset.ready = "1";
})();
"""


def _frame(page: _Page, order: list[_Page], api_index: str) -> str:
    k = order.index(page)
    items = []
    for p in order:
        cur = ' class="current"' if p is page else ""
        sub = f"<ul>{p.toc}</ul>" if p is page and p.toc else ""
        items.append(f'<li{cur}><a href="{p.name}">{html.escape(p.nav)}</a>{sub}</li>')
    prev = f'<a href="{order[k - 1].name}">← {html.escape(order[k - 1].nav)}</a>' if k else "<span></span>"
    nxt = (f'<a href="{order[k + 1].name}">{html.escape(order[k + 1].nav)} →</a>' if k + 1 < len(order)
           else f'<a href="{api_index}">API reference →</a>')
    title = html.escape(_plain(page.title or page.nav))
    from pygments.formatters import HtmlFormatter

    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{title} — symgraph</title>\n<style>{_CSS}\n{HtmlFormatter().get_style_defs('.codehilite')}</style>\n"
        "</head>\n<body>\n<nav>\n<strong><a href=\"index.html\">symgraph</a></strong>\n"
        "<p><input id=\"sg-search\" type=\"search\" placeholder=\"search the guide and the API\" "
        "aria-label=\"search\"></p><div id=\"sg-search-results\"></div>\n"
        f"<h2>User guide</h2>\n<ul>{''.join(items)}</ul>\n"
        f"<h2>API reference</h2>\n<ul><li><a href=\"{api_index}\">every public module</a></li></ul>\n</nav>\n"
        f"<main>\n{page.html}\n<div class=\"sg-pager\">{prev}{nxt}</div>\n</main>\n"
        "<script src=\"search-index.js\"></script>\n<script src=\"search.js\"></script>\n</body>\n</html>\n"
    )


def unlisted_pages() -> list[str]:
    """docs/*.md pages that `GUIDE` does not list (unreachable in the site)."""
    listed = {src for src, _ in GUIDE}
    return sorted(f"docs/{p.name}" for p in DOCS.glob("*.md") if f"docs/{p.name}" not in listed)


def build_guide(out: Path, api_names: list[tuple[str, str]], api_index: str = "../api/index.html") -> list[str]:
    """Write the guide's pages into `out`; return the problems found (empty when clean).

    Args:
        out: the guide's directory (created).
        api_names: (qualified name, URL relative to `out`) of each public API name, for the search.
        api_index: the URL of the API reference's first page, relative to `out`.
    """
    out.mkdir(parents=True, exist_ok=True)
    problems = [f"{p} is not listed in docs/guide.py GUIDE (the site would not link to it)" for p in unlisted_pages()]
    order = [_Page(src, nav) for src, nav in GUIDE]
    pages = {p.src: p for p in order}
    index: list[dict] = []
    for p in order:
        if p.title is None:
            problems.append(f"{p.src}: no '# title' line")
        _render(p)
    for p in order:
        _fix_links(p, pages, out, problems)
        index.extend(_sections(p))
    index.extend({"page": "API reference", "title": name, "url": url, "text": ""} for name, url in api_names)
    for p in order:
        (out / p.name).write_text(_frame(p, order, api_index), encoding="utf-8")
    (out / "search-index.js").write_text("window.SG_SEARCH_INDEX = " + json.dumps(index, ensure_ascii=False)
                                         .replace("</", "<\\/") + ";\n", encoding="utf-8")
    (out / "search.js").write_text(_SEARCH_JS, encoding="utf-8")
    return problems
