"""Where we are: one architecture figure per family, drawn as BERT's stack with the blocks the
family changed in colour, and BERT's input representation (token + segment + position).

A variant is a diff: each family's figure is BERT's list of blocks with some replaced, so the
coloured boxes are exactly what the paper changed (the notes say how).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from course_lib.viz._figure import CourseFigure


@dataclass(frozen=True)
class Block:
    """One box of the diagram: its label, a short note, and whether the family changed it."""

    label: str
    note: str = ""
    changed: bool = False
    repeat: str = ""  # e.g. "x L": drawn as a bracket beside the layer boxes


def _bert_blocks() -> list[Block]:
    return [
        Block("WordPiece tokens", "30k vocabulary; [CLS] A [SEP] B [SEP]"),
        Block("embeddings", "token + segment + learned position, LayerNorm"),
        Block("self-attention", "12 heads, softmax(QK^T/sqrt(d))V", repeat="x L"),
        Block("add & LayerNorm", "post-LN", repeat="x L"),
        Block("feed-forward", "H -> 4H -> H, GELU", repeat="x L"),
        Block("add & LayerNorm", "post-LN", repeat="x L"),
        Block("heads", "MLM (tied decoder) + NSP on pooled [CLS]"),
    ]


def _replace(blocks: list[Block], index: int, **changes: Any) -> list[Block]:
    old = blocks[index]
    blocks = list(blocks)
    blocks[index] = Block(
        changes.get("label", old.label),
        changes.get("note", old.note),
        True,
        changes.get("repeat", old.repeat),
    )
    return blocks


def family_blocks(family: str) -> list[Block]:
    """The diagram of `family` as BERT's blocks with the changed ones marked."""
    b = _bert_blocks()
    if family == "bert":
        return b
    if family == "roberta":
        b = _replace(b, 0, label="byte-level BPE", note="50k, no [UNK]; <s> A </s></s> B </s>")
        b = _replace(b, 1, note="token + position (ids from padding_idx + 1), no segments")
        return _replace(b, 6, label="MLM head", note="dynamic masking, no NSP")
    if family == "albert":
        b = _replace(
            b, 0, label="SentencePiece tokens", note="30k vocabulary; [CLS] A [SEP] B [SEP]"
        )
        b = _replace(b, 1, label="factorized embedding", note="V x E then E x H (E = 128)")
        for i in range(2, 6):
            b = _replace(b, i, repeat="one layer, applied L times")
        return _replace(b, 6, note="MLM + SOP (sentence order) on pooled [CLS]")
    if family == "deberta":
        b = _replace(b, 0, label="BPE tokens", note="v1: GPT-2's 50k BPE; v3: SentencePiece 128k")
        b = _replace(b, 1, note="token only: no absolute position at the input")
        b = _replace(b, 2, label="disentangled attention", note="c2c + c2p + p2c, relative buckets")
        return _replace(b, 6, label="EMD + MLM head", note="absolute positions enter just before")
    if family == "distilbert":
        b = _replace(b, 1, note="token + position, no segments")
        for i in range(2, 6):
            b = _replace(b, i, repeat="x L/2, init from every 2nd teacher layer")
        return _replace(b, 6, label="MLM head", note="soft targets of the teacher (T), no NSP")
    if family == "electra":
        b = _replace(b, 1, note="E may be < H (small: 128 vs 256); shared with the generator")
        return _replace(
            b, 6, label="discriminator head", note="replaced or original, every token (RTD)"
        )
    if family == "modernbert":
        b = _replace(
            b, 0, label="BPE tokens", note="50k BPE (OLMo's, modified); up to 8,192 tokens"
        )
        b = _replace(b, 1, note="token only, LayerNorm without bias")
        b = _replace(b, 2, label="rotary attention", note="global every 3rd layer, else window 128")
        b = _replace(b, 3, label="residual add", note="x + attention(LN(x)): pre-LN, no biases")
        b = _replace(b, 4, label="GeGLU feed-forward", note="gated GELU")
        b = _replace(
            b, 5, label="residual add", note="x + GeGLU(LN(x)); one LayerNorm after the stack"
        )
        return _replace(b, 6, label="MLM head", note="no NSP; tied decoder")
    raise ValueError(f"no architecture figure for {family!r}; families: {', '.join(FAMILIES)}")


DISPLAY_NAMES = {
    "bert": "BERT",
    "roberta": "RoBERTa",
    "albert": "ALBERT",
    "deberta": "DeBERTa",
    "distilbert": "DistilBERT",
    "electra": "ELECTRA",
    "modernbert": "ModernBERT",
}
FAMILIES = tuple(DISPLAY_NAMES)


def architecture_figure(family: str, title: str | None = None) -> CourseFigure:
    """The family's encoder as a stack of boxes, bottom (tokens) to top (heads); the blocks that
    differ from BERT are coloured and annotated."""
    blocks = family_blocks(family)
    fig = CourseFigure(figsize=(7.5, 0.62 * len(blocks) + 0.9))
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.6, len(blocks) + 0.2)
    ax.axis("off")
    for row, block in enumerate(blocks):
        face = "#f6c87a" if block.changed else "#dfe8f3"
        ax.add_patch(_box(1.0, row, 3.2, 0.7, face, edge="#b36b00" if block.changed else "#6a87a8"))
        ax.text(2.6, row + 0.35, block.label, ha="center", va="center", fontsize=9)
        ax.text(4.5, row + 0.35, textwrap.fill(block.note, 52), va="center", fontsize=7.5)
        if row:
            ax.annotate("", (2.6, row), (2.6, row - 0.3), arrowprops={"arrowstyle": "->"})
    layer_rows = [row for row, block in enumerate(blocks) if block.repeat]
    if layer_rows:
        low, high = min(layer_rows), max(layer_rows) + 0.7
        ax.plot([0.75, 0.6, 0.6, 0.75], [low, low, high, high], color="0.3", lw=1)
        repeat = blocks[layer_rows[0]].repeat
        ax.text(0.5, (low + high) / 2, textwrap.fill(repeat, 14), ha="right", va="center",
                fontsize=7.5, color="#b36b00" if blocks[layer_rows[0]].changed else "0.2")  # fmt: skip
    default = f"{DISPLAY_NAMES[family]}: the blocks that differ from BERT are coloured"
    ax.set_title(title or (default if family != "bert" else "BERT: the stack every variant edits"),
                 fontsize=10)  # fmt: skip
    return fig


def _box(x: float, y: float, w: float, h: float, face: str, edge: str):
    from matplotlib.patches import FancyBboxPatch

    return FancyBboxPatch(
        (x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", facecolor=face, edgecolor=edge
    )


def input_representation_figure(
    tokens: list[str], segments: list[int] | None = None
) -> CourseFigure:
    """BERT's input representation (the paper's Figure 2): for every token, the sum of its token,
    segment and position embeddings. `segments` defaults to A up to and including the first
    [SEP], then B."""
    if not tokens:
        raise ValueError("input_representation_figure needs at least one token.")
    if segments is None:
        first_sep = tokens.index("[SEP]") if "[SEP]" in tokens else len(tokens) - 1
        segments = [0 if i <= first_sep else 1 for i in range(len(tokens))]
    if len(segments) != len(tokens):
        raise ValueError(
            f"{len(tokens)} tokens but {len(segments)} segment ids; give one segment id per token."
        )
    n = len(tokens)
    fig = CourseFigure(figsize=(max(6.0, 1.05 * n + 1.6), 3.1))
    ax = fig.add_subplot()
    ax.set_xlim(-1.7, n)
    ax.set_ylim(-0.3, 4.6)
    ax.axis("off")
    rows = [
        ("input", tokens, "white", "0.4"),
        ("token", [f"E_{t}" for t in tokens], "#f6e3a8", "#a88a2a"),
        ("segment", [f"E_{'AB'[s]}" for s in segments], "#cfe6c8", "#5b8a4f"),
        ("position", [f"E_{i}" for i in range(n)], "#d9d4ee", "#6d5fa8"),
    ]
    for r, (name, labels, face, edge) in enumerate(rows):
        y = 3.6 - 1.05 * r
        ax.text(-0.2, y + 0.3, name if r == 0 else f"{name}\nembeddings", ha="right", va="center",
                fontsize=8)  # fmt: skip
        for i, label in enumerate(labels):
            ax.add_patch(_box(i + 0.05, y, 0.9, 0.6, face, edge))
            ax.text(i + 0.5, y + 0.3, label, ha="center", va="center", fontsize=7)
            if r >= 2:
                ax.text(i + 0.5, y + 0.78, "+", ha="center", va="center", fontsize=10)
    ax.set_title("BERT's input: token + segment + position embeddings, summed (then LayerNorm)",
                 fontsize=9)  # fmt: skip
    return fig
