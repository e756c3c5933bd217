"""Collator: padding, labels, generators, static vs dynamic masking, DataLoader workers."""

import pytest
import torch
from test_pairs import make_docs
from torch.utils.data import DataLoader

from course_lib.data import PretrainingCollator, StaticMaskedDataset
from course_lib.data.pairs import make_format_examples, make_nsp_examples, make_sop_examples
from course_lib.objectives.masking import IGNORE_INDEX, MaskingConfig
from course_lib.tokenization import train_tokenizer

DOCS = make_docs(n_docs=40, seed=1)


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer("bert", [d.text for d in DOCS], vocab_size=200)


@pytest.fixture(scope="module")
def examples(tok):
    return make_format_examples(DOCS, tok, 48, format="doc-sentences")


def selected(batch):
    return batch["labels"] != IGNORE_INDEX


def test_padding_shapes_and_masks(tok, examples):
    collate = PretrainingCollator(tok, masking=None)
    rows = examples[:6]
    batch = collate(rows)
    width = max(len(e["input_ids"]) for e in rows)
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids"}
    for key in batch:
        assert batch[key].shape == (6, width) and batch[key].dtype == torch.long
    for i, e in enumerate(rows):
        n = len(e["input_ids"])
        assert batch["input_ids"][i, :n].tolist() == e["input_ids"]  # masking=None: untouched
        assert (batch["input_ids"][i, n:] == tok.pad_token_id).all()
        assert batch["attention_mask"][i].tolist() == [1] * n + [0] * (width - n)
    padded = PretrainingCollator(tok, masking=None, pad_to_multiple_of=32)(rows)
    assert padded["input_ids"].shape[1] % 32 == 0 and padded["input_ids"].shape[1] >= width


def test_mlm_labels_skip_padding_and_specials(tok, examples):
    batch = PretrainingCollator(tok)(examples[:64], generator=torch.Generator().manual_seed(0))
    sel = selected(batch)
    assert not sel[batch["attention_mask"] == 0].any()
    original = PretrainingCollator(tok, masking=None)(examples[:64])["input_ids"]
    assert not torch.isin(original[sel], torch.tensor(tok.special_ids)).any()
    assert torch.equal(batch["labels"][sel], original[sel])
    rate = sel.sum() / (batch["attention_mask"].sum() - 2 * 64)  # minus [CLS] and [SEP]
    assert 0.10 < rate < 0.20


def test_sentence_labels_are_batched(tok):
    nsp = make_nsp_examples(DOCS, tok, 48, seed=0)[:8]
    sop = make_sop_examples(DOCS, tok, 48, seed=0)[:8]
    collate = PretrainingCollator(tok)
    b = collate(nsp)
    assert b["next_sentence_label"].tolist() == [e["next_sentence_label"] for e in nsp]
    assert (
        b["token_type_ids"].tolist()[0][: len(nsp[0]["token_type_ids"])] == nsp[0]["token_type_ids"]
    )
    assert collate(sop)["sentence_order_label"].tolist() == [e["sentence_order_label"] for e in sop]
    with pytest.raises(ValueError, match="Only some examples have 'next_sentence_label'"):
        collate(nsp[:2] + [{k: v for k, v in nsp[2].items() if k != "next_sentence_label"}])


def test_explicit_generator_reproduces_and_dynamic_masks_change(tok, examples):
    collate = PretrainingCollator(tok, seed=0)
    rows = examples[:32]
    a = collate(rows, generator=torch.Generator().manual_seed(5))
    b = collate(rows, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
    # Without a generator: the internal one moves on, so each epoch gets new masks.
    epoch1, epoch2 = collate(rows), collate(rows)
    assert not torch.equal(epoch1["labels"], epoch2["labels"])
    # ... and a fresh collator with the same seed repeats the same sequence of masks.
    again = PretrainingCollator(tok, seed=0)
    assert torch.equal(again(rows)["labels"], epoch1["labels"])


def test_static_masking_is_fixed_across_epochs(tok, examples):
    rows = examples[:20]
    static = StaticMaskedDataset(rows, MaskingConfig(), duplicates=3, seed=0, tokenizer=tok)
    assert len(static) == 60
    epoch1 = [static[i] for i in range(len(static))]
    epoch2 = [static[i] for i in range(len(static))]
    assert epoch1 == epoch2  # the same masks every epoch
    # The k copies of one example are masked differently.
    copies = [epoch1[j]["labels"] for j in (0, 20, 40)]
    assert copies[0] != copies[1] or copies[1] != copies[2]
    for item, ex in zip(epoch1[:20], rows):
        assert len(item["input_ids"]) == len(item["labels"]) == len(ex["input_ids"])
        for got, label, orig in zip(item["input_ids"], item["labels"], ex["input_ids"]):
            assert label in (IGNORE_INDEX, orig)
            if label == IGNORE_INDEX:
                assert got == orig
    # The collator pads pre-masked items and does not mask them again.
    collate = PretrainingCollator(tok)
    batch = collate([static[i] for i in range(8)])
    for i in range(8):
        n = len(static[i]["input_ids"])
        assert batch["input_ids"][i, :n].tolist() == static[i]["input_ids"]
        assert batch["labels"][i, :n].tolist() == static[i]["labels"]
        assert (batch["labels"][i, n:] == IGNORE_INDEX).all()
    with pytest.raises(ValueError, match="do not mix"):
        collate([static[0], rows[0]])


def test_static_dataset_rejects_bad_arguments(tok, examples):
    with pytest.raises(ValueError, match="tokenizer=..."):
        StaticMaskedDataset(examples[:4], MaskingConfig())
    with pytest.raises(ValueError, match="duplicates=0"):
        StaticMaskedDataset(examples[:4], PretrainingCollator(tok), duplicates=0)
    with pytest.raises(ValueError, match="masking=None"):
        StaticMaskedDataset(examples[:4], PretrainingCollator(tok, masking=None))


def test_whole_word_masking_through_the_collator(tok, examples):
    collate = PretrainingCollator(tok, MaskingConfig(whole_word=True, mlm_probability=0.3))
    rows = examples[:64]
    batch = collate(rows, generator=torch.Generator().manual_seed(0))
    sel = selected(batch)
    for i, e in enumerate(rows):
        words = e["word_ids"]
        for j in range(1, len(words)):
            if words[j] >= 0 and words[j] == words[j - 1]:
                assert sel[i, j] == sel[i, j - 1]
    with pytest.raises(ValueError, match="needs 'word_ids'"):
        collate([{"input_ids": rows[0]["input_ids"]}])
    with pytest.raises(ValueError, match="empty list"):
        collate([])


def _loader_labels(tok, rows, loader_seed, epochs=1):
    collate = PretrainingCollator(tok, seed=0)
    loader = DataLoader(
        rows,
        batch_size=8,
        num_workers=2,
        collate_fn=collate,
        generator=torch.Generator().manual_seed(loader_seed),
    )
    return [[b["labels"] for b in loader] for _ in range(epochs)]


def test_dataloader_workers_are_seeded_reproducibly(tok, examples):
    # 4 batches of the same 8 rows: workers 0 and 1 each mask two of them.
    rows = [examples[0]] * 8 * 4
    run1 = _loader_labels(tok, rows, loader_seed=1, epochs=2)
    run2 = _loader_labels(tok, rows, loader_seed=1, epochs=1)
    other = _loader_labels(tok, rows, loader_seed=2, epochs=1)
    first = run1[0]
    assert all(torch.equal(x, y) for x, y in zip(first, run2[0]))  # same seed, same masks
    assert not torch.equal(first[0], first[1])  # worker 0 vs worker 1 differ
    assert not torch.equal(first[0], first[2])  # a worker's consecutive batches differ
    assert not all(torch.equal(x, y) for x, y in zip(first, run1[1]))  # new epoch, new masks
    assert not all(torch.equal(x, y) for x, y in zip(first, other[0]))
