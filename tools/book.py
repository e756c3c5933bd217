"""The course as a book: a static website of every chapter, built from the committed notebooks.

    python tools/book.py                  # writes build/book/, prints the page to open and the time
    python tools/book.py --out site/      # elsewhere
    python -m http.server -d build/book   # then http://localhost:8000 (or open index.html)

Needs the `docs` extra (`pip install -e '.[docs]'`) and nothing else: no network, no Node, and
no notebook is executed (the committed outputs are the ones shown).

Why Sphinx + MyST-NB + sphinx-book-theme, not Jupyter Book 2 / mystmd: all three are plain PyPI
packages that build fully offline, search is Sphinx's own offline index (a JavaScript file in
the site), and the library reference comes from autodoc in the same build. mystmd (Jupyter
Book 2) is a Node program whose website themes are fetched from its template service
(api.mystmd.org) at build time, so it neither installs with pip alone nor builds offline.
Math is rendered by a local copy of MathJax (the `jupyter-server-mathjax` package), because
Sphinx's default MathJax comes from a CDN.

The build never touches the committed files. A staging folder (temporary) receives:

* the home page: the repository README (links to files outside the site become plain text);
* per chapter, its README as the landing page, then its lesson notebooks in the order of the
  README's `| NN | `file.ipynb` | ... |` table (chapters/*/instructor/ and solutions/ are never
  copied, and links into them are dropped);
* in each notebook, under its title: a "Run it yourself" box with the README's two Quick start
  commands (read by tools/readme_commands.py, never retyped) and `jupyter lab <its path>`, and
  the course_lib classes the book uses for the first time there, linked to their reference;
* "Build it yourself" solutions collapsed behind a toggle: a code cell tagged `build` in its
  metadata, and the first code cell after a markdown cell whose first line says "build/write
  ... yourself" or "your turn", get MyST-NB's `hide-input`. In a lesson copy generated from a
  lesson master (tools/make_student_notebooks.py) the `build` cell is the learner's stub, shown
  as it is with its check's verdict, and the "Show a solution" cell after it becomes that
  collapsed code cell (the same toggle, the code highlighted, never executed);
* one reference page per module of course_lib (sphinx.ext.autodoc, from the docstrings).

The build fails (exit 1) on a broken internal reference (a missing document, label, class or
image) and reports, but tolerates, other warnings.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import json
import pkgutil
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from readme_commands import quick_start_commands  # noqa: E402

DEFAULT_OUT = ROOT / "build" / "book"
DOCS_PACKAGES = ("sphinx", "myst_nb", "sphinx_book_theme", "jupyter_server_mathjax")
INSTALL_HINT = "pip install -e '.[docs]'"
PRIVATE_FOLDERS = ("instructor", "solutions")  # never published: answers and nbgrader masters

# "Build it yourself", "Write it yourself", "Build the three heads yourself", "Your turn: ...".
SOLUTION_HEADING = re.compile(r"\b(build|write)\b[^.:]*\byourself\b|\byour turn\b", re.I)
SOLUTION_TAG = "build"  # a cell tagged so in its metadata is a solution, whatever precedes it
# A lesson copy's build cell as the learner gets it, and the closed solution after its check
# (tools/make_student_notebooks.py: STUB_LINES, SOLUTION_DETAILS).
STUB = "raise NotImplementedError()"
SOLUTION_DETAILS = re.compile(
    r"<details><summary>Show a solution</summary>\s*```python\n(.*?)\n```\s*</details>", re.S
)
SHOW_SOLUTION = "Show the solution (try it yourself first)"
HIDE_SOLUTION = "Hide the solution"
TABLE_ROW = re.compile(r"^\|\s*\d+\s*\|\s*`([^`]+\.ipynb)`\s*\|", re.M)
MARKDOWN_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
BROKEN_REFERENCE = re.compile(
    r"reference target not found|xref_missing|undefined label|unknown document|"
    r"nonexisting document|image file not readable|Unknown target name",
    re.I,
)


class MissingDocsPackages(RuntimeError):
    """The `docs` extra is not installed."""


@dataclass
class Chapter:
    name: str  # folder name, e.g. 01_bert
    readme: str  # its README.md text
    notebooks: list[str] = field(default_factory=list)  # file names, in the README's order


def check_docs_packages() -> None:
    """Raise MissingDocsPackages naming the fix when a package the build needs is absent."""
    missing = [name for name in DOCS_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingDocsPackages(
            f"the book needs {', '.join(missing)}: {INSTALL_HINT} installs them"
        )


def chapters(root: Path = ROOT) -> list[Chapter]:
    """Every chapter folder, with its lesson notebooks in the order of its README's table
    (a notebook the table forgets comes last, so the book never silently drops a lesson)."""
    found = []
    for folder in sorted(p for p in (root / "chapters").iterdir() if p.is_dir()):
        readme = folder / "README.md"
        if not readme.exists():
            continue
        text = readme.read_text(encoding="utf-8")
        present = {p.name for p in folder.glob("*.ipynb")}
        ordered = [name for name in TABLE_ROW.findall(text) if name in present]
        ordered += sorted(present - set(ordered))
        found.append(Chapter(folder.name, text, list(dict.fromkeys(ordered))))
    return found


# ---------------------------------------------------------------------------------------------
# Markdown rewriting
# ---------------------------------------------------------------------------------------------


def rewrite_links(text: str, here: str, pages: set[str]) -> str:
    """Keep links to external sites and to pages of the book; a link to anything else (a file
    the book does not publish, solutions/ or instructor/ above all) becomes its plain text.
    `here` is the page's folder relative to the book's root, `pages` the book's documents
    (relative paths, with suffix)."""

    def replace(match: re.Match[str]) -> str:
        bang, label, target = match.groups()
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            return match.group(0)  # external (https:, mailto:) or an anchor on this page
        path = target.split("#", 1)[0]
        resolved = Path(here, path).as_posix()
        parts = Path(resolved).parts
        if not any(part in PRIVATE_FOLDERS for part in parts) and (
            _normalise(resolved) in pages or bang
        ):
            return match.group(0)
        return label if label.startswith("`") or not label else f"`{label}`"

    return MARKDOWN_LINK.sub(replace, text)


def _normalise(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def link_notebook_table(readme: str, notebooks: Iterable[str]) -> str:
    """The chapter README's table, with each notebook name a link to its page."""
    names = set(notebooks)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            return match.group(0)
        return match.group(0).replace(f"`{name}`", f"[`{name}`]({name})", 1)

    return TABLE_ROW.sub(replace, readme)


def link_chapter_map(readme: str, chapter_names: Iterable[str]) -> str:
    """The home page's chapter map, with each `chapters/<name>/` a link to the chapter."""
    for name in chapter_names:
        readme = readme.replace(
            f"| `chapters/{name}/` |", f"| [`chapters/{name}/`](chapters/{name}/index.md) |"
        )
    return readme


def run_it_yourself(path: str, commands: list[str]) -> str:
    """The "Run it yourself" box: the README's two Quick start commands, then `jupyter lab`
    on `path` (the notebook or chapter folder, relative to the repository)."""
    return "\n".join(
        [
            "````{admonition} Run it yourself",
            ":class: tip run-it-yourself",
            "",
            "From a clone of the repository (README, *Quick start*): install and pretrain a "
            "tiny BERT, install what the tests need and run them, then open this page live.",
            "",
            "```bash",
            *commands,
            f"jupyter lab {path}",
            "```",
            "````",
        ]
    )


def library_pieces(classes: list[str]) -> str:
    """The "Library pieces first used here" box, each class linked to its reference entry."""
    items = [f"- {{py:class}}`{name.rsplit('.', 1)[1]} <{name}>`" for name in classes]
    return "\n".join(
        [
            "```{admonition} Library pieces first used here",
            ":class: seealso library-pieces",
            "",
            *items,
            "```",
        ]
    )


# ---------------------------------------------------------------------------------------------
# Notebooks
# ---------------------------------------------------------------------------------------------


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def solution_details_code(markdown: str) -> str | None:
    """The code of a lesson copy's "Show a solution" cell (tools/make_student_notebooks.py writes
    it after each build cell's check), or None for any other markdown."""
    match = SOLUTION_DETAILS.fullmatch(markdown.strip())
    return match.group(1) if match else None


def mark_solutions(notebook: dict) -> int:
    """Give every solution cell MyST-NB's `hide-input` tag and a "Show the solution" prompt;
    returns how many. A solution is a code cell tagged `build` (unless it is the learner's stub),
    a lesson copy's "Show a solution" cell, made a code cell, or, in a notebook that is not a
    lesson copy, the first code cell after a markdown cell whose first line matches
    SOLUTION_HEADING."""
    count, waiting = 0, False
    # In a lesson copy the tags say which cells are the learner's: the code under a "Build it
    # yourself" heading that is not tagged is given to read, not a solution to hide.
    lesson_copy = any(
        solution_details_code(_source(c)) is not None
        for c in notebook["cells"]
        if c["cell_type"] == "markdown"
    )
    for index, cell in enumerate(notebook["cells"]):
        shown_answer = None
        if cell["cell_type"] == "markdown":
            shown_answer = solution_details_code(_source(cell))
            if shown_answer is None:
                lines = _source(cell).strip().splitlines()
                heading = bool(lines) and bool(SOLUTION_HEADING.search(lines[0]))
                waiting = heading and not lesson_copy
                continue
            cell = notebook["cells"][index] = {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": shown_answer,
            }
        if cell["cell_type"] != "code":
            continue
        metadata = cell.setdefault("metadata", {})
        tags = metadata.setdefault("tags", [])
        if SOLUTION_TAG in tags and STUB in _source(cell):
            waiting = False  # the learner's to write: shown; its solution comes after the check
            continue
        if waiting or SOLUTION_TAG in tags or shown_answer is not None:
            if "hide-input" not in tags:
                tags.append("hide-input")
            metadata.setdefault("mystnb", {}).update(
                code_prompt_show=SHOW_SOLUTION, code_prompt_hide=HIDE_SOLUTION
            )
            count += 1
        waiting = False
    return count


def classes_used(notebook: dict) -> list[str]:
    """Full names (defining module + qualified name) of the course_lib classes the notebook's
    code imports or reaches as `alias.Name`, in order of first appearance."""
    found: dict[str, None] = {}
    modules: dict[str, object] = {}  # local name -> course_lib module

    def note(obj: object) -> None:
        if inspect.isclass(obj) and obj.__module__.startswith("course_lib"):
            found.setdefault(f"{obj.__module__}.{obj.__qualname__}", None)

    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        code = "\n".join(
            line for line in _source(cell).splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_lib"):
                try:
                    module = importlib.import_module(node.module)
                except ImportError:
                    continue
                for alias in node.names:
                    obj = getattr(module, alias.name, None)
                    if inspect.ismodule(obj):
                        modules[alias.asname or alias.name] = obj
                    note(obj)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("course_lib") and alias.asname:
                        try:
                            modules[alias.asname] = importlib.import_module(alias.name)
                        except ImportError:
                            continue
            elif isinstance(node, ast.Attribute):
                chain, base = [node.attr], node.value
                while isinstance(base, ast.Attribute):
                    chain.append(base.attr)
                    base = base.value
                if not isinstance(base, ast.Name):
                    continue
                obj = modules.get(base.id)
                if obj is None and base.id == "course_lib":
                    obj = importlib.import_module("course_lib")
                for attr in reversed(chain):
                    obj = getattr(obj, attr, None) if obj is not None else None
                note(obj)
    return list(found)


def stage_notebook(
    notebook: dict, repo_path: str, commands: list[str], new_classes: list[str], pages: set[str]
) -> int:
    """Prepare one lesson notebook for the book, in place: boxes under the title, links to
    unpublished files dropped, widget state removed (the site shows widgets' static text),
    solutions collapsed. Returns the number of collapsed solutions."""
    here = str(Path(repo_path).parent)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = rewrite_links(_source(cell), here, pages)
    boxes = run_it_yourself(repo_path, commands)
    if new_classes:
        boxes += "\n\n" + library_pieces(new_classes)
    first = notebook["cells"][0] if notebook["cells"] else None
    if first is not None and first["cell_type"] == "markdown" and _source(first).startswith("# "):
        title, _, rest = _source(first).partition("\n")
        first["source"] = f"{title}\n\n{boxes}\n\n{rest.lstrip()}"
    else:
        notebook["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "source": boxes})
    notebook.get("metadata", {}).pop("widgets", None)
    return mark_solutions(notebook)


# ---------------------------------------------------------------------------------------------
# The library reference
# ---------------------------------------------------------------------------------------------


def library_modules() -> list[str]:
    """Every module of course_lib, packages included, sorted."""
    import course_lib

    names = ["course_lib"]
    for info in pkgutil.walk_packages(course_lib.__path__, prefix="course_lib."):
        names.append(info.name)
    return sorted(names)


def write_reference(folder: Path, modules: list[str]) -> None:
    """api/index.rst and one api/<module>.rst per module (autodoc from the docstrings)."""
    folder.mkdir(parents=True, exist_ok=True)
    title = "Library reference: course_lib"
    index = [
        title,
        "=" * len(title),
        "",
        "One page per module of the course's library, from its docstrings. The lessons link "
        "here where they first use a class.",
        "",
        ".. toctree::",
        "   :maxdepth: 1",
        "",
        *(f"   {name}" for name in modules),
        "",
    ]
    (folder / "index.rst").write_text("\n".join(index), encoding="utf-8")
    for name in modules:
        page = [
            f"``{name}``",
            "=" * (len(name) + 4),
            "",
            f".. automodule:: {name}",
            "   :members:",
            "   :undoc-members:",
            "   :show-inheritance:",
            "",
        ]
        (folder / f"{name}.rst").write_text("\n".join(page), encoding="utf-8")


def plain_docstring(lines: list[str]) -> list[str]:
    """course_lib's docstrings are plain text, not reStructuredText: `|d|` is an absolute value,
    `*` a product, an indented block or a `| table |` is preformatted. Rewrite them so that
    docutils shows them as written: indented blocks and tables become literal blocks, `|` and
    `*` outside backticks are escaped. Applied by the book's autodoc (autodoc-process-docstring)."""
    out: list[str] = []
    literal = False  # inside a literal block
    for line in lines:
        stripped = line.strip()
        preformatted = bool(stripped) and (line.startswith(" ") or stripped.startswith("|"))
        if literal:
            if not stripped or preformatted:
                out.append("    " + line if stripped else "")
                continue
            literal = False
            if out and out[-1]:
                out.append("")
        elif preformatted:
            written = [text for text in out if text.strip()]
            if written and written[-1].endswith("::"):  # already a literal block
                out += [""] if out[-1] else []
            else:
                out += ["", "::", ""] if out and out[-1] else ["::", ""]
            out.append("    " + line)
            literal = True
            continue
        parts = re.split(r"(``.*?``|`[^`]*`)", line)
        for i in range(0, len(parts), 2):  # the text between code spans
            text = parts[i].replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")
            text = re.sub(r"(\w)_(?!\w)", r"\1\\_", text)  # `name_` is not a reference
            if i > 0 and re.match(r"\w", text):  # `AddedToken`s
                text = "\\ " + text
            if i < len(parts) - 1 and re.search(r"\w$", text):
                text += "\\ "
            parts[i] = text
        out.append("".join(parts))
    return out


def skip_foreign_member(
    app: object, what: str, name: str, obj: object, skip: bool, options: object
) -> bool | None:
    """Skip members that only pass through course_lib (matplotlib's generated `Artist.set`)."""
    module = getattr(obj, "__module__", None)
    if callable(obj) and isinstance(module, str) and not module.startswith("course_lib"):
        return True
    return None


# ---------------------------------------------------------------------------------------------
# Sphinx configuration and the build
# ---------------------------------------------------------------------------------------------

CONF_PY = '''\
"""Sphinx configuration of the course book, written by tools/book.py (not committed)."""

import sys

project = "Encoders from Scratch"
author = "the course authors"
copyright = "the course authors, MIT licence"
extensions = ["myst_nb", "sphinx.ext.autodoc"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "sphinx_book_theme"
html_title = "Encoders from Scratch"
html_static_path = ["_static"]
html_css_files = ["book.css"]
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
}
html_context = {"default_mode": "light"}  # else the theme logs "invalid theme mode" once
html_favicon = "_static/favicon.svg"  # else the browser asks for /favicon.ico, a 404
html_show_sourcelink = False
html_copy_source = False

# The committed outputs are the book: nothing is executed, nothing is fetched.
nb_execution_mode = "off"
nb_ipywidgets_js = {}  # widget JavaScript comes from a CDN: the site shows widgets' text
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# MathJax 2 from the jupyter-server-mathjax package, copied into _static/mathjax/.
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
myst_update_mathjax = False
mathjax2_config = {
    "tex2jax": {
        "inlineMath": [["\\\\(", "\\\\)"]],
        "displayMath": [["\\\\[", "\\\\]"]],
        "processEscapes": True,
    },
    # The package ships the STIX-Web fonts only (as Jupyter's classic notebook configured it).
    # MathJax's "blank" test font is url('about:blank'), which Chromium refuses with a console
    # error: a local() font that does not exist serves the same purpose without a request.
    "HTML-CSS": {
        "availableFonts": [],
        "imageFont": None,
        "preferredFont": None,
        "webFont": "STIX-Web",
        "styles": {"@font-face": {"font-family": "MathJax_Blank", "src": "local('MathJax_Blank')"}},
    },
    "messageStyle": "none",
    "menuSettings": {"zoom": "None"},
}

autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False  # torch's nn.Module.forward docstring is not ours
autodoc_default_options = {"ignore-module-all": True}
autodoc_typehints = "signature"
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type", "misc.highlighting_failure"]
default_role = "code"  # `name` in a docstring is code, as in the lessons' Markdown

sys.path.insert(0, {tools!r})
from book import plain_docstring, skip_foreign_member  # noqa: E402


def setup(app):
    def process(app, what, name, obj, options, lines):
        lines[:] = plain_docstring(lines)

    app.connect("autodoc-process-docstring", process)
    app.connect("autodoc-skip-member", skip_foreign_member)
'''

FAVICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    '<rect width="16" height="16" rx="3" fill="#2a6f97"/>'
    '<text x="8" y="12" font-size="10" text-anchor="middle" fill="#fff">E</text></svg>'
)
BOOK_CSS = """\
/* Written by tools/book.py. */
.run-it-yourself pre { font-size: 0.8em; }
.library-pieces ul { columns: 2; margin-bottom: 0; }
"""


def stage(source: Path, root: Path = ROOT) -> dict[str, int]:
    """Write the book's sources into `source` (a fresh folder). Returns, per notebook page,
    the number of collapsed solutions."""
    import jupyter_server_mathjax

    readme = (root / "README.md").read_text(encoding="utf-8")
    commands = quick_start_commands(readme)
    found = chapters(root)
    pages = {"index.md"} | {f"chapters/{c.name}/index.md" for c in found}
    pages |= {f"chapters/{c.name}/{nb}" for c in found for nb in c.notebooks}

    (source / "_static").mkdir(parents=True)
    shutil.copytree(
        Path(jupyter_server_mathjax.__file__).parent / "static", source / "_static" / "mathjax"
    )
    (source / "_static" / "book.css").write_text(BOOK_CSS, encoding="utf-8")
    (source / "_static" / "favicon.svg").write_text(FAVICON_SVG, encoding="utf-8")
    (source / "conf.py").write_text(
        CONF_PY.replace("{tools!r}", repr(str(ROOT / "tools"))), encoding="utf-8"
    )

    home = link_chapter_map(rewrite_links(readme, ".", pages), [c.name for c in found])
    toc = ["```{toctree}", ":hidden:", ":caption: Chapters", ""]
    toc += [f"chapters/{c.name}/index" for c in found] + ["```", ""]
    toc += ["```{toctree}", ":hidden:", ":caption: Reference", "", "api/index", "```", ""]
    (source / "index.md").write_text(home.rstrip() + "\n\n" + "\n".join(toc), encoding="utf-8")

    modules = library_modules()
    write_reference(source / "api", modules)

    seen: set[str] = set()
    solutions: dict[str, int] = {}
    for chapter in found:
        folder = source / "chapters" / chapter.name
        folder.mkdir(parents=True)
        text = link_notebook_table(chapter.readme, chapter.notebooks)
        text = rewrite_links(text, f"chapters/{chapter.name}", pages)
        title, _, rest = text.partition("\n")
        box = run_it_yourself(f"chapters/{chapter.name}/", commands)
        toc = ["```{toctree}", ":hidden:", ""]
        toc += [Path(nb).stem for nb in chapter.notebooks] + ["```", ""]
        (folder / "index.md").write_text(
            f"{title}\n\n{box}\n\n{rest.lstrip().rstrip()}\n\n" + "\n".join(toc), encoding="utf-8"
        )
        for name in chapter.notebooks:
            repo_path = f"chapters/{chapter.name}/{name}"
            notebook = json.loads((root / repo_path).read_text(encoding="utf-8"))
            documented = [c for c in classes_used(notebook) if c.rsplit(".", 1)[0] in modules]
            new = [c for c in documented if c not in seen]
            seen.update(new)
            solutions[repo_path] = stage_notebook(notebook, repo_path, commands, new, pages)
            (folder / name).write_text(json.dumps(notebook, ensure_ascii=False), encoding="utf-8")
    return solutions


def build(out: Path = DEFAULT_OUT, root: Path = ROOT, jobs: str = "auto") -> dict[str, object]:
    """Stage and build the book into `out` (replaced). Returns a summary: the index page, the
    seconds taken, the warnings, and the collapsed solutions per notebook. Raises
    MissingDocsPackages, or RuntimeError when Sphinx fails or a reference is broken."""
    check_docs_packages()
    from sphinx.cmd.build import build_main

    start = time.perf_counter()
    out = out.resolve()
    with tempfile.TemporaryDirectory(prefix="course-book-") as tmp:
        source = Path(tmp) / "source"
        solutions = stage(source, root)
        if out.exists():
            shutil.rmtree(out)
        warnings_file = Path(tmp) / "warnings.txt"
        status = build_main(
            [
                "-b",
                "html",
                "-q",
                "-j",
                jobs,
                "-d",
                str(Path(tmp) / "doctrees"),
                "-w",
                str(warnings_file),
                str(source),
                str(out),
            ]
        )
        warnings = warnings_file.read_text(encoding="utf-8").splitlines()
    warnings = [line for line in warnings if "WARNING" in line or "ERROR" in line]
    if status != 0:
        raise RuntimeError(f"Sphinx failed (exit {status})")
    broken = [line for line in warnings if BROKEN_REFERENCE.search(line)]
    if broken:
        raise RuntimeError("broken internal references:\n" + "\n".join(broken))
    return {
        "index": out / "index.html",
        "seconds": time.perf_counter() - start,
        "warnings": warnings,
        "solutions": solutions,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default: build/book/")
    parser.add_argument("--jobs", default="auto", help="Sphinx's -j (default: auto)")
    args = parser.parse_args(argv)
    try:
        summary = build(args.out, jobs=args.jobs)
    except MissingDocsPackages as err:
        print(f"book: error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        print(f"book: error: {err}", file=sys.stderr)
        return 1
    collapsed = sum(summary["solutions"].values())
    print(
        f"book: {len(summary['solutions'])} notebooks, {collapsed} solutions collapsed, "
        f"{len(summary['warnings'])} warnings; built in {summary['seconds']:.0f} s"
    )
    print(f"open {summary['index']}  (or: python -m http.server -d {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
