"""Fill-mask helpers: which sentences are used, what a hit is, and the length limit."""

from __future__ import annotations

import torch

from course_lib import BertConfig
from course_lib.models import BertForMaskedLM
from course_lib.tokenization import train_tokenizer
from course_lib.training.inference import (
    fill_mask,
    fill_mask_report,
    format_fill_mask_report,
    masked_word_examples,
)

SHORT = ["the cat sat on the warm mat today", "a dog ran in the big park today"]
LONG = ["the list of words in this sentence is long enough to need many more tokens " * 3]


def tokenizer():
    return train_tokenizer("wordpiece", SHORT * 20 + LONG * 5, vocab_size=200)


def test_examples_hide_one_single_token_word_and_respect_max_tokens():
    tok = tokenizer()
    examples = masked_word_examples(tok, SHORT + LONG, n=10, seed=0)
    assert len(examples) == 3
    for text, answer in examples:
        assert text.split().count(tok.mask_token) == 1 and len(tok.tokenize(answer)) == 1
    limit = max(len(tok.tokenize(s)) for s in SHORT) + 2
    assert len(tok.tokenize(LONG[0])) + 2 > limit  # the long sentence would not fit
    kept = masked_word_examples(tok, SHORT + LONG, n=10, seed=0, max_tokens=limit)
    assert len(kept) == 2 and all(tok.mask_token in t for t, _ in kept)
    assert masked_word_examples(tok, SHORT, n=10, max_tokens=limit - 1 - 5) == []


def test_report_hit_means_the_answer_is_in_the_top_k():
    tok = tokenizer()
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        pad_token_id=tok.pad_token_id,
    )
    model = BertForMaskedLM(config).eval()
    rows = fill_mask_report(model, tok, SHORT + LONG, n=3, top_k=4, max_tokens=12)
    assert len(rows) == 2
    for row in rows:
        top = [p["token_str"] for p in fill_mask(model, tok, row["text"], top_k=4)]
        assert row["predictions"] == top
        assert row["hit"] == (row["answer"].lower() in [w.lower() for w in top])


def test_report_format_lists_the_first_rows_and_counts_all():
    rows = [
        {
            "text": f"sentence {i} [MASK]",
            "answer": "w",
            "predictions": ["w" if i % 2 else "x"] * 5,
            "hit": bool(i % 2),
        }
        for i in range(20)
    ]
    full = format_fill_mask_report(rows, "after training")
    assert full.splitlines()[0] == (
        "after training: the hidden word is in the top 5 for 10 of 20 held-out sentences"
    )
    assert len(full.splitlines()) == 1 + 2 * 20
    short = format_fill_mask_report(rows, "before training", show=3)
    lines = short.splitlines()
    assert lines[0].endswith("for 10 of 20 held-out sentences")  # the count covers all 20
    assert (
        len(lines) == 1 + 2 * 3 + 1
        and lines[-1].strip() == "... 17 more sentences in the count above"
    )
    assert format_fill_mask_report(rows, show=20) == format_fill_mask_report(rows)


def test_course_pretrain_scores_twenty_sentences_by_default():
    from course_lib.training.cli import build_parser

    args = build_parser().parse_args(["pretrain"])
    assert args.samples == 20
    assert build_parser().parse_args(["evaluate", "ckpt"]).samples == 20
