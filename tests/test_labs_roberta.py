"""Chapter 02 RoBERTa labs: the pair language and its static/dynamic masks, the text with letters
the tokenizers never saw, the word-recovery metric, and each lab's fast preset."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.data.collator import PretrainingCollator
from course_lib.labels import IGNORE_INDEX
from course_lib.labs import get_lab, labs_of, roberta, run_lab
from course_lib.objectives.masking import MaskingConfig
from course_lib.tokenization import train_tokenizer

LABS = ("dynamic_vs_static_masking", "byte_bpe_vs_wordpiece")


def test_chapter_registers_both_labs() -> None:
    assert [lab.name for lab in labs_of("02_roberta")] == list(LABS)
    masking, tokens = (get_lab(name) for name in LABS)
    assert masking.compare == ("dynamic", "static") and masking.expected_sign == "+"
    assert tokens.compare == ("byte_bpe", "wordpiece") and tokens.expected_sign == "+"


def test_pair_language_every_token_is_a_function_of_its_partner() -> None:
    perm = torch.randperm(roberta.N_SYMBOLS, generator=torch.Generator().manual_seed(0))
    examples = roberta.sample_pair_sequences(perm, 50, 4, torch.Generator().manual_seed(1))
    tokenizer = roberta.symbol_tokenizer()
    for e in examples:
        ids = e["input_ids"]
        assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        content = torch.tensor(ids[1:-1]) - roberta.N_SPECIAL
        first, second = content[0::2], content[1::2]
        assert torch.equal(first, perm[second])  # a = perm[b]: each determines the other
    assert tokenizer.decode(examples[0]["input_ids"]).split()[0].startswith("s")


def _selected(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return batch["labels"] != IGNORE_INDEX


def test_static_masks_repeat_every_epoch_and_dynamic_masks_do_not() -> None:
    perm = torch.randperm(roberta.N_SYMBOLS, generator=torch.Generator().manual_seed(0))
    train = roberta.sample_pair_sequences(perm, 32, roberta.PAIRS, torch.Generator().manual_seed(1))
    collator = PretrainingCollator(roberta.symbol_tokenizer(), MaskingConfig())
    static = roberta.static_batches(train, collator, seed=0)
    rows = torch.arange(len(train))
    generator = torch.Generator().manual_seed(2)
    epochs = {
        kind: [roberta.masked_batch(train, rows, collator, table, generator) for _ in range(3)]
        for kind, table in (("static", static), ("dynamic", None))
    }
    s0, s1, s2 = epochs["static"]
    assert torch.equal(s0["input_ids"], s1["input_ids"]) and torch.equal(s1["labels"], s2["labels"])
    d0, d1, _ = epochs["dynamic"]
    assert not torch.equal(_selected(d0), _selected(d1))
    # the same masking rate in both pipelines: only *when* the mask is drawn differs
    rate = {
        k: float(torch.stack([_selected(b) for b in v]).float().mean()) for k, v in epochs.items()
    }
    assert all(0.08 < r < 0.22 for r in rate.values())
    # the targets are the original tokens in both
    for batch in (s0, d0):
        chosen = _selected(batch)
        original = torch.tensor([e["input_ids"] for e in train])
        assert torch.equal(batch["labels"][chosen], original[chosen])


@pytest.fixture(scope="module")
def text() -> dict[str, object]:
    generator = torch.Generator().manual_seed(0)
    keys, values = roberta.make_lexicon(generator)
    sentences = roberta.sample_sentences(keys, values, 200, generator)
    tokenizer_text = [roberta.without_unseen(s) for s in sentences]
    return {"keys": keys, "values": values, "sentences": sentences, "tok_text": tokenizer_text}


def test_test_text_has_letters_the_tokenizer_text_lacks(text) -> None:
    seen = set("".join(text["tok_text"]))
    test_chars = set("".join(text["sentences"]))
    unseen = test_chars - seen
    assert unseen and unseen <= set(roberta.UNSEEN)
    assert all(c.isascii() for c in seen)
    marked = [v for v in text["values"] if v[-1] in roberta.UNSEEN]
    assert len(marked) == roberta.N_KEYS // 2
    assert len(set(text["keys"]) | set(text["values"])) == 2 * roberta.N_KEYS


def test_wordpiece_loses_the_new_words_and_byte_bpe_keeps_them(text) -> None:
    values = text["values"]
    marked = [v for v in values if v[-1] in roberta.UNSEEN]
    wordpiece = train_tokenizer("wordpiece", text["tok_text"], vocab_size=400)
    bpe = train_tokenizer("bpe", text["tok_text"], vocab_size=400)
    assert roberta.unknown_rate(wordpiece, marked) == 1.0
    assert roberta.unknown_rate(wordpiece, text["keys"]) == 0.0
    assert roberta.unknown_rate(bpe, values) == 0.0
    assert roberta.lossless_rate(bpe, values) == 1.0
    assert roberta.lossless_rate(wordpiece, values) == pytest.approx(0.5)
    example = roberta.encode_sentences(bpe, text["sentences"][:1])[0]
    assert bpe.decode(example["input_ids"]).strip() == text["sentences"][0]
    assert max(example["word_ids"]) == 3 * roberta.CLAUSES - 1


class _Oracle(torch.nn.Module):
    """Predicts the true ids everywhere (the ids are passed in): the metric's upper bound."""

    def __init__(self, truth: torch.Tensor, vocab: int) -> None:
        super().__init__()
        self.truth, self.vocab = truth, vocab

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        logits = torch.nn.functional.one_hot(self.truth, self.vocab).float()
        return type("Out", (), {"mlm_logits": logits})()


def test_word_recovery_counts_unknown_words_as_lost(text) -> None:
    sentences = text["sentences"][:100]
    for family in ("bpe", "wordpiece"):
        tokenizer = train_tokenizer(family, text["tok_text"], vocab_size=400)
        examples = roberta.encode_sentences(tokenizer, sentences)
        truth = PretrainingCollator(tokenizer, masking=None)(examples)["input_ids"]
        oracle = _Oracle(truth, tokenizer.vocab_size)
        score = roberta.masked_word_accuracy(oracle, tokenizer, sentences, 0, torch.device("cpu"))
        if family == "bpe":
            assert score == 1.0  # every word can be written, so a perfect model recovers all
        else:  # a perfect model still loses every word it can only write as [UNK]
            assert 0.6 < score < 0.9


@pytest.mark.parametrize("name", LABS)
def test_fast_preset_returns_finite_values_for_every_arm(name: str) -> None:
    result = run_lab(name, seeds=1, preset="fast", device="cpu", progress=False)
    lab = get_lab(name)
    assert result["lab"] == name and result["chapter"] == "02_roberta"
    assert set(result["arms"]) == set(lab.arms)
    for values in result["arms"].values():
        assert len(values) == 1 and math.isfinite(values[0]) and 0.0 <= values[0] <= 1.0
