"""Provenance: every result-like number in a lesson's or README's prose comes from a source.

Issue #39: numbers quoted in prose drifted from the runs they came from (mostly a notebook
quoting another notebook's or an experiment's result that was re-run later). This test reads
every lesson notebook (the instructor masters, not the generated student copies), every chapter
README, the top README, `benchmarks/README.md` and `experiments/labs/README.md`, and fails with
"<document> cell <n>: <number> ..." for each number it cannot source. Pure text processing: no
notebook is executed, so it runs in seconds.

Which numbers are checked (in markdown prose, LaTeX math included):
- every percentage ("34.7%", "94%"), except a rate the same document's code sets (15% where its
  code says 0.15 or 15);
- both sides of every ± pair ("+0.036 ± 0.054", "52.5 ± 1.9");
- every t or p value written "t = 2.4", "p = 0.12", "p ≈ 0.3" (a bound "p < 0.05" is a rule,
  not a result, and is not checked);
- every other number with 3 or more significant digits ("0.127", "1.55x", "23.4M", "9.54e-07",
  "5.40", "30,522"), except the settings named below.

Not checked, by rule: numbers inside code (fenced blocks, `inline code`, link targets: paths,
commands and identifiers); integers that are years (1900-2039); integers that are powers of two
from 64 up (sizes: 128, 256, 1024); plain integers that also appear as literals in the same
document's code (a notebook's code cells, a README's code): settings such as 768 or 30522 that
the reader can see set. Numbers with 1-2 significant digits that are not percentages, ± pairs, t
or p ("0.5", "12 layers", "2,000 steps") are not checked: they are settings or counts, and a
two-digit figure matches too many source values to say anything.

Where a number may come from (its sources):
- a notebook's own outputs (stream, text/plain, text/markdown, text/html of every code cell);
- a results file the document names: any `*.json`, `*.log`, `*.csv` or `*.txt` path in its text
  or code, resolved against the repository root, the document's folder and the results folders,
  or a results folder it names (every such file in it); a lab named in a notebook's code by
  `load_result(".../<lab>.json")` is covered by the same rule;
- for a README only: the outputs of a notebook it names (a README has no outputs of its own);
- `docs/citations.csv` (value, source, where): paper figures, with the paper and table or
  section. A citation row sources its value in every document.
A notebook never sources a number from another notebook's outputs: a cross-notebook number must
be read from the results file in a code cell and printed (issue #39, "quote by reading").

How a number matches (within its printed rounding): a prose number x printed with d decimals
matches a source value v when |v - x| <= 0.5 * 10^-d (x = 0.036 matches 0.0355 to 0.0365; for
"9.54e-07" the tolerance is 0.005e-07). Source values are every number in the source text or
JSON, also read with their printed suffix ("66.1%" is 66.1 and 0.661; "23.4M" is 23.4 and
23400000). A percentage p% matches v or 100 v ("34.7%" matches 0.347 or 34.7); a number with a
suffix M/k/B matches v or v / 10^6 (10^3, 10^9); signs are ignored ("-0.104" and "worse by
0.104" both match 0.104 or -0.104).

Seeds: a claim that something held in "every seed", "each seed", "all seeds" or "all <n>
seeds" needs at least 5 seeds (chapter 01, notebook 06; with fewer, say "3 of 3 seeds"; whether
an effect is beyond noise is `course_lib.stats.judge`'s verdict, not these words): it fails when
the largest seed count the same paragraph gives is below 5 ("3 seeds", "three seeds", "seeds
0-2") unless it also says so ("too few", "fewer than 5").
"""

from __future__ import annotations

import bisect
import csv
import importlib.util
import json
import math
import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_student_notebooks as msn  # noqa: E402

# course_lib.stats by file: the course's own paired comparison, without importing torch.
_spec = importlib.util.spec_from_file_location("_course_stats", ROOT / "src/course_lib/stats.py")
stats = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stats)

CITATIONS = ROOT / "docs" / "citations.csv"
RESULTS_DIRS = sorted(
    {p.parent for p in ROOT.glob("experiments/*/results/*.json")}
    | {p.parent for p in ROOT.glob("benchmarks/results/**/*.json")}
)
SOURCE_SUFFIXES = {".json", ".log", ".csv", ".txt"}


def lesson_notebooks() -> list[Path]:
    """Every lesson notebook; an exercise notebook or a lesson with build cells is read as its
    solved master (the copy is generated from it and has the same prose, stubs for answers)."""
    masters = msn.master_notebooks() + msn.lesson_masters()
    generated = {msn.student_path(m) for m in masters}
    lessons = [p for p in sorted(ROOT.glob("chapters/*/*.ipynb")) if p not in generated]
    return sorted(lessons + masters)


def readmes() -> list[Path]:
    """The READMEs the issue names: the top one, the benchmarks', the labs' and each chapter's."""
    return [
        ROOT / "README.md",
        ROOT / "benchmarks" / "README.md",
        ROOT / "experiments" / "labs" / "README.md",
        *sorted(ROOT.glob("chapters/*/README.md")),
    ]


# ---------------------------------------------------------------- numbers in prose

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+−]?\d+|\s?[·×]\s?10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)?"
SUPERSCRIPT = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
# A number not glued to a word, identifier, path or version on its left.
NUMBER = re.compile(
    rf"(?<![\w.\-/^@#])(?P<sign>[-+−])?(?P<num>{_NUM})"
    rf"(?P<suffix>\s?%|(?:M|k|K|B)(?![A-Za-z])|[x×](?![A-Za-z0-9]))?(?![\w.]\d|\w)"
)
PM = re.compile(rf"(?P<a>[-+−]?{_NUM})\s*%?\s*(?:±|\\pm|\+/-|\+-)\s*(?P<b>{_NUM})")
TP = re.compile(rf"(?<![\w])(?P<what>[tp])\s*(?:=|≈|\\approx)\s*(?P<num>[-+−]?{_NUM})")


ARXIV = re.compile(r"\d{4}\.\d{4,5}")
VERSION = re.compile(
    r"(?:Python|PyTorch|torch|transformers|nbgrader|version|v)\s*(?:[≥>=<]=?\s*)?$"
)


@dataclass(frozen=True)
class Claim:
    """A number read from prose: its text, value, decimals, kind and the unit suffix."""

    text: str
    value: float
    decimals: int
    kind: str  # "percent", "pm", "tp" or "figure"
    suffix: str = ""

    @property
    def tolerance(self) -> float:
        return 0.5 * 10.0 ** (-self.decimals) * (1 + 1e-9) + 1e-12


def parse_number(text: str) -> tuple[float, int]:
    """(absolute value, decimals of its last printed digit; negative for exponents)."""
    t = text.replace(",", "").replace("−", "-").lstrip("+-")
    t = re.sub(
        r"\s?[·×]\s?10([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)", lambda m: "e" + m.group(1).translate(SUPERSCRIPT), t
    )
    mant, _, exp = t.lower().partition("e")
    decimals = len(mant.partition(".")[2])
    if exp:
        decimals -= int(exp)
    return abs(float(t.replace("−", "-"))), decimals


def significant_digits(text: str) -> int:
    t = text.replace(",", "").lstrip("+-−")
    mant = re.split(r"[eE·×]", t)[0].strip()
    if "." in mant:
        return len(mant.replace(".", "").lstrip("0"))
    return len(mant.lstrip("0").rstrip("0"))


def strip_code(markdown: str) -> str:
    """Markdown without code (fenced blocks, inline spans), link targets, URLs and HTML tags."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"(`+).*?\1", " ", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "] ", text)
    text = re.sub(r"https?://\S+", " ", text)
    text = re.sub(r"<[^>]+>", " ", text)
    return text


def code_literals(text: str) -> set[str]:
    """Numeric literals in code (fenced blocks and inline spans of markdown, or a code cell),
    normalised: "30_522" and "30,522" are "30522", "0.40" is "0.4"."""
    out = set()
    for m in re.findall(r"\d[\d_,]*(?:\.\d+)?(?:[eE][-+]?\d+)?", text):
        m = m.replace(",", "").replace("_", "")
        out.add(m)
        try:
            out.add(repr(float(m)))
        except ValueError:
            pass
    return out


def claims(prose: str, settings: set[str]) -> list[Claim]:
    """The numbers in `prose` (markdown with code removed) that this test checks."""
    out: list[Claim] = []
    taken: set[int] = set()
    for m in PM.finditer(prose):
        for g in ("a", "b"):
            value, decimals = parse_number(m.group(g))
            suffix = "%" if "%" in prose[m.end(g) : m.end(g) + 2] else ""
            out.append(Claim(m.group(g), value, decimals, "pm", suffix))
            taken.add(m.start(g))
    for m in TP.finditer(prose):
        value, decimals = parse_number(m.group("num"))
        out.append(Claim(f"{m.group('what')} = {m.group('num')}", value, decimals, "tp"))
        taken.add(m.start("num"))
    for m in NUMBER.finditer(prose):
        if m.start("num") in taken or (m.group("sign") and m.start("sign") in taken):
            continue
        num, suffix = m.group("num"), (m.group("suffix") or "").strip()
        value, decimals = parse_number(num)
        if suffix == "%":
            if repr(value / 100) in settings or repr(value) in settings:
                continue  # a rate set in the document's code (mlm_probability=0.15)
            out.append(Claim(num + "%", value, decimals, "percent", "%"))
            continue
        if significant_digits(num) < 3:
            continue
        is_int = re.fullmatch(r"[\d,]+", num) is not None
        plain = num.replace(",", "")
        if ARXIV.fullmatch(num) or VERSION.search(prose[max(0, m.start() - 24) : m.start()]):
            continue  # an arXiv identifier or a software version
        if is_int and not suffix:
            if 1900 <= value <= 2039 and "," not in num:
                continue  # a year
            if value >= 64 and math.log2(value).is_integer():
                continue  # a size
            if plain in settings:
                continue  # set in the document's code
        out.append(Claim(num + suffix, value, decimals, "figure", suffix))
    return out


# ---------------------------------------------------------------- sources

SOURCE_NUMBER = re.compile(
    r"(?<![\d.])[-+−]?(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+−]?\d+)?|\.\d+)"
    r"(?P<suffix>\s?%|[MkKB](?![A-Za-z]))?"
)
SCALE = {"%": 0.01, "M": 1e6, "k": 1e3, "K": 1e3, "B": 1e9}


def text_values(text: str) -> list[float]:
    """Every number in a source text, with its suffix applied and not."""
    values = []
    for m in SOURCE_NUMBER.finditer(text):
        try:
            v = abs(float(m.group("num").replace(",", "").replace("−", "-")))
        except ValueError:
            continue
        values.append(v)
        suffix = (m.group("suffix") or "").strip()
        if suffix:
            values.append(v * SCALE[suffix])
    return values


def json_values(obj) -> list[float]:
    if isinstance(obj, bool):
        return []
    if isinstance(obj, (int, float)):
        return [abs(float(obj))] if math.isfinite(obj) else []
    if isinstance(obj, str):
        return text_values(obj)
    if isinstance(obj, dict):
        return arm_statistics(obj) + [
            v for k, x in obj.items() for v in text_values(str(k)) + json_values(x)
        ]
    if isinstance(obj, list):
        return [v for x in obj for v in json_values(x)]
    return []


def arm_statistics(obj: dict) -> list[float]:
    """What the course computes from a results file's per-seed arms ({"arm": [one value per
    seed], ...}, at least two arms of equal length): each arm's mean and std, and for every
    ordered pair the paired comparison (course_lib.stats.compare: mean ± std of the per-seed
    difference, t, p). A notebook prints these from the file; a README quotes them."""
    arms = {
        k: v
        for k, v in obj.items()
        if isinstance(v, list)
        and len(v) >= 2
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
    }
    values: list[float] = []
    for v in arms.values():
        s = stats.mean_std(v)
        values += [abs(s["mean"]), s["std"]]
    for a in arms:
        for b in arms:
            if a != b and len(arms[a]) == len(arms[b]):
                c = stats.compare(arms[a], arms[b])
                values += [abs(c[k]) for k in ("mean", "std", "t", "p") if c[k] is not None]
    return [v for v in values if math.isfinite(v)]


@cache
def file_values(path: Path) -> tuple[float, ...]:
    if path.suffix == ".json":
        try:
            return tuple(json_values(json.loads(path.read_text())))
        except json.JSONDecodeError:
            pass
    return tuple(text_values(path.read_text(errors="replace")))


@cache
def citations() -> tuple[tuple[float, str], ...]:
    """(value, "source, where") for each row of docs/citations.csv."""
    if not CITATIONS.exists():
        return ()
    with CITATIONS.open(newline="") as f:
        return tuple(
            (v, f"{row['source']}, {row['where']}")
            for row in csv.DictReader(f)
            for v in text_values(row["value"])
        )


PATH = re.compile(r"[\w./+=,-]*[\w+=,-]\.(?:json|log|csv|txt)\b|[\w./-]*results/[\w./-]*")


def named_files(text: str, folder: Path) -> list[Path]:
    """Results files (or every file in a results folder) that `text` names."""
    found: list[Path] = []
    for name in set(PATH.findall(text)):
        name = name.strip("./") if name.startswith("./") else name.rstrip("./")
        bases = [ROOT, folder, *RESULTS_DIRS]
        for base in bases:
            p = (base / name).resolve()
            if p.is_file() and p.suffix in SOURCE_SUFFIXES:
                found.append(p)
                break
            if p.is_dir() and ROOT in p.parents and "results" in p.parts:
                found += [q for q in sorted(p.rglob("*")) if q.suffix in SOURCE_SUFFIXES]
                break
    return found


def output_text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if "text" in out:
                parts.append(out["text"])
            for mime in ("text/plain", "text/markdown", "text/html", "text/latex"):
                if mime in out.get("data", {}):
                    parts.append(str(out["data"][mime]))
    return "\n".join(parts)


NOTEBOOK_NAME = re.compile(r"(?:chapters/)?(?:(\d\d_\w+)/)?(\d\d_\w+)\.ipynb")


@dataclass
class Document:
    """A notebook or README: its prose by cell, its settings and its sources."""

    path: Path
    cells: list[tuple[int, str]]  # (cell index, markdown)
    settings: set[str]
    values: list[float] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT))

    def sourced(self, claim: Claim) -> bool:
        scales = [1.0]
        if claim.kind == "percent" or claim.suffix == "%":
            scales.append(100.0)
        if claim.suffix in SCALE and claim.suffix != "%":
            scales.append(1 / SCALE[claim.suffix])
        for scale in scales:
            lo = (claim.value - claim.tolerance) / scale
            hi = (claim.value + claim.tolerance) / scale
            i = bisect.bisect_left(self.values, lo)
            if i < len(self.values) and self.values[i] <= hi:
                return True
        return False


def load_notebook(path: Path) -> Document:
    nb = nbformat.read(path, as_version=4)
    cells = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    markdown = "\n".join(src for _, src in cells)
    doc = Document(path, cells, code_literals(code) | code_literals(_code_in(markdown)))
    doc.files = named_files(code + "\n" + markdown, path.parent)
    values = text_values(output_text(nb))
    for f in doc.files:
        values += file_values(f)
    doc.values = sorted(values + [v for v, _ in citations()])
    return doc


def _code_in(markdown: str) -> str:
    return "\n".join(
        re.findall(r"```.*?```", markdown, flags=re.S) + re.findall(r"`[^`]+`", markdown)
    )


def load_readme(path: Path) -> Document:
    text = path.read_text()
    # A README's "cells" are its paragraphs, numbered by their first line.
    cells, start, lines = [], 0, text.splitlines()
    for i, line in enumerate(lines + [""]):
        if not line.strip():
            if i > start:
                cells.append((start + 1, "\n".join(lines[start:i])))
            start = i + 1
    doc = Document(path, cells, code_literals(_code_in(text)))
    doc.files = named_files(text, path.parent)
    values = []
    for f in doc.files:
        values += file_values(f)
    for m in NOTEBOOK_NAME.finditer(text):
        for nb in _resolve_notebook(m, path.parent):
            values += text_values(output_text(nbformat.read(nb, as_version=4)))
    doc.values = sorted(values + [v for v, _ in citations()])
    return doc


def _resolve_notebook(m: re.Match, folder: Path) -> list[Path]:
    chapter, stem = m.group(1), m.group(2)
    pattern = f"chapters/{chapter or '*'}/{stem}.ipynb"
    hits = sorted(ROOT.glob(pattern)) or sorted(folder.glob(f"{stem}.ipynb"))
    return [msn_master(p) for p in hits]


def msn_master(path: Path) -> Path:
    master = path.parent / "instructor" / path.name
    return master if master.exists() else path


# ---------------------------------------------------------------- seeds

SEED_CLAIM = re.compile(
    r"\b(?:in |on |for |across )?(?:every|each) (?:single )?seed\b|\ball (?:the )?"
    r"(?:(?:\w+|\d+) )?seeds\b",
    re.I,
)
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "ten": 10}
SEED_COUNT = re.compile(r"\b(\d+|one|two|three|four|five|six|seven|ten) (?:\w+ )?seeds\b", re.I)
SEED_RANGE = re.compile(r"seeds? (\d+)\s*(?:-|–|to|…|\.\.)\s*(\d+)", re.I)
CAVEAT = re.compile(r"too few|fewer than (?:5|five)|< ?5 seeds|not beyond noise", re.I)


def seed_problems(text: str) -> list[str]:
    """Universal claims over seeds in a paragraph that gives fewer than 5 seeds."""
    problems = []
    for para in re.split(r"\n\s*\n", text):
        claims_ = list(SEED_CLAIM.finditer(para))
        if not claims_ or CAVEAT.search(para):
            continue
        counts = [
            WORDS.get(m.group(1).lower()) or int(m.group(1)) for m in SEED_COUNT.finditer(para)
        ]
        counts += [int(b) - int(a) + 1 for a, b in SEED_RANGE.findall(para)]
        if counts and max(counts) < 5:
            problems.append(f"'{claims_[0].group(0)}' with {max(counts)} seeds")
    return problems


# ---------------------------------------------------------------- the tests

DOCUMENTS = lesson_notebooks() + readmes()


@cache
def document(path: Path) -> Document:
    return load_notebook(path) if path.suffix == ".ipynb" else load_readme(path)


def unsourced(path: Path) -> list[str]:
    doc = document(path)
    where = "cell" if path.suffix == ".ipynb" else "line"
    problems = []
    for index, markdown in doc.cells:
        prose = strip_code(markdown)
        for claim in claims(prose, doc.settings):
            if not doc.sourced(claim):
                problems.append(
                    f"{doc.name} {where} {index}: {claim.text} ({claim.kind}) is in none of its "
                    f"sources (outputs, {len(doc.files)} named results files, docs/citations.csv)"
                )
        for p in seed_problems(prose):
            problems.append(f"{doc.name} {where} {index}: {p} (the course's rule is >= 5 seeds)")
    return problems


# Documents still expected to fail (issue #39): none left. A document added here is a strict xfail:
# it must fail, and leave the set once fixed.
TODO: set[str] = set()


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="issue #39: still to do"))
        if str(p.relative_to(ROOT)) in TODO
        else p
        for p in DOCUMENTS
    ],
    ids=[str(p.relative_to(ROOT)) for p in DOCUMENTS],
)
def test_every_number_has_a_source(path):
    problems = unsourced(path)
    assert not problems, "\n".join(problems)


if __name__ == "__main__":  # a report: python tests/test_provenance.py [paths]
    paths = [Path(a).resolve() for a in sys.argv[1:]] or DOCUMENTS
    total = 0
    for p in paths:
        for line in unsourced(p):
            print(line)
            total += 1
    print(total, "unsourced")
