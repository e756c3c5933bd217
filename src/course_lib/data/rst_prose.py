"""Cleaning reStructuredText-flavoured documentation (pydoc topics, docstrings) into prose.

Literal blocks, doctest sessions, tables, headings, directives and lines that look like code
are dropped; inline markup (:func:`len`, ``literal``, `text <url>`_) is reduced to its text.
Used by the built-in corpus (course_lib.data.builtin_corpus); pure text in, paragraphs out.
"""

from __future__ import annotations

import re

from course_lib.data.corpus import split_paragraphs

_INLINE_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r":[\w:.-]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`"), r"\1"),  # :func:`len` -> len
    (re.compile(r"`([^`<]+?)\s*<[^>]+>`_{1,2}"), r"\1"),  # `text <url>`_ -> text
    (re.compile(r"``([^`]+)``"), r"\1"),  # ``literal`` -> literal
    (re.compile(r"``([^`'\n]+)''"), r'"\1"'),  # old-style ``quote'' -> "quote"
    (re.compile(r"`([^`'\n]+)'"), r"'\1'"),  # old-style `quote' -> 'quote'
    (re.compile(r"`([^`\n]+)`_?"), r"\1"),
    # Emphasis only around words: "**" and "*args" are Python syntax, not markup.
    (re.compile(r"\*\*([A-Za-z0-9][^*\"\n]{0,80}?)\*\*(?![\w*])"), r"\1"),
    (re.compile(r"(?<![\w*\"])\*([A-Za-z][^*\"\n]{0,80}?)\*(?![*\"])"), r"\1"),
    (re.compile(r"\s\[\d+\]"), ""),  # footnote references
]
_CHAR_MAP = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "…": "...", "\u00a0": " "})
# Paragraphs that introduce an indented block of prose rather than a code example.
_LABELS = frozenset(
    "note notes warning warnings see also args arguments parameters params returns return "
    "raises yields attributes keyword arguments important caution tip hint".split(" ")
)
_CODE_LINE = re.compile(
    r"^\s*(>>>|\.\.\.\s|\$ |#|@\w|def |class |import |from \S+ import |return\b|raise\b|"
    r"if .*:$|elif .*:$|else:|for .*:$|while .*:$|try:|except\b.*:$|finally:|with .*:$|"
    r"print\(|[\w.\[\]]+\s*[-+*/]?=\s*\S|[\w.]+\(.*\)$|[{}\[\]()]+,?$)"
)
_SIGNATURE = re.compile(r"^\s*[\w.]+\(.*\)\s*(->.*)?$|^\s*[\w.]+\(.*\)\s*-->.*$")
_BULLET = re.compile(r"^(?:[*\-•]|\d+\.|\(\d+\)|\[\d+\])\s+")
# "argv -- command line arguments": one definition per line, as in sys.__doc__.
_DEFINITION = re.compile(r"^[\w.()\[\], ]+ -- ")
_DIRECTIVE = re.compile(r"^\s*\.\.\s+[\w:-]+::")
_FIELD = re.compile(
    r"^\s*:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?)"
    r"(\s+[^:]*)?:\s*"
)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_label(text: str) -> bool:
    words = text.strip().rstrip(":").lower()
    return text.strip().endswith(":") and (words in _LABELS or words.startswith("changed in"))


def _clean_inline(text: str) -> str:
    text = text.translate(_CHAR_MAP)
    for pattern, repl in _INLINE_RULES:
        text = pattern.sub(repl, text)
    return re.sub(r"\s+", " ", text).strip()


def is_prose_sentence(sentence: str) -> bool:
    """At least three words and mostly letters: drops leftovers such as `x = f(y)`."""
    if len(sentence.split()) < 3:
        return False
    visible = [c for c in sentence if not c.isspace()]
    letters = sum(c.isalpha() for c in visible)
    return letters >= 0.7 * len(visible)


def clean_rst(text: str, counts: dict[str, int]) -> list[str]:
    """Turn documentation text (pydoc topics or a docstring) into prose paragraphs.

    Indented blocks deeper than the surrounding prose are literal blocks (code, grammar,
    tables) unless a label like "Note:" introduces them; doctest sessions, tables, headings,
    directives and lines that look like code are dropped. `counts` tallies what was removed.
    """
    text = text.expandtabs(8).replace("\r\n", "\n")
    lines = [ln.rstrip() for ln in text.split("\n")]
    # Headings: a line followed by an underline of one repeated punctuation character.
    for i in range(len(lines) - 1):
        under = lines[i + 1].strip()
        if lines[i].strip() and len(under) >= 3 and len(set(under)) == 1 and not under.isalnum():
            lines[i] = ""
            counts["headings"] = counts.get("headings", 0) + 1
    kept: list[str] = []
    prose_level = 0
    after_label = False
    for para in split_paragraphs("\n".join(lines)):
        para_lines = [ln for ln in para.split("\n") if ln.strip()]
        indent = min(_indent(ln) for ln in para_lines)
        if indent > prose_level and not after_label:
            counts["literal_blocks"] = counts.get("literal_blocks", 0) + 1
            continue
        # Code is judged per paragraph: one wrapped prose line may start with "len(x)", but
        # a paragraph that is mostly code lines is an example, not prose.
        if sum(bool(_CODE_LINE.match(ln)) for ln in para_lines) * 2 >= len(para_lines):
            counts["code_paragraphs"] = counts.get("code_paragraphs", 0) + 1
            continue
        out: list[str] = []
        for line in para_lines:
            stripped = line.strip()
            if stripped.startswith(">>>") or _DIRECTIVE.match(line):
                counts["code_lines"] = counts.get("code_lines", 0) + 1
                break  # a doctest session or directive runs to the end of its paragraph
            if stripped[0] in "|+" or re.fullmatch(r"[-=~*^+#:. ]+|-\[.*\]-", stripped):
                counts["table_or_rule_lines"] = counts.get("table_or_rule_lines", 0) + 1
                continue
            if not kept and not out and _SIGNATURE.match(line):
                counts["signature_lines"] = counts.get("signature_lines", 0) + 1
                continue  # "int(x, base=10) -> integer" opening a C docstring
            out.append(_FIELD.sub("", stripped))
        if not out:
            continue
        # List items ("* x", "1. x") are separate units; continuation lines join the item.
        first = para_lines[0]
        bullet = re.match(r"^\s*" + _BULLET.pattern[1:], first)
        prose_level = _indent(first) + (len(bullet.group(0)) - _indent(first) if bullet else 0)
        if len(para_lines) > 1:
            prose_level = min(prose_level, _indent(para_lines[1])) if not bullet else prose_level
        after_label = _is_label(" ".join(out))
        if after_label:
            continue
        item: list[str] = []
        for line in out:
            starts_item = _BULLET.match(line) or _DEFINITION.match(line)
            if starts_item and item:
                kept.append(_clean_inline(" ".join(item)))
                item = []
            item.append(_BULLET.sub("", line))
        kept.append(_clean_inline(" ".join(item)))
    return [p for p in kept if p]


__all__ = ["clean_rst", "is_prose_sentence"]
