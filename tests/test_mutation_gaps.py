"""Tests that close gaps found by mutation testing (tools/mutation.py, docs/mutation.md).

Each test here was written against a small, realistic bug that the rest of the suite let
through; the docstring names that bug. Every one was checked to fail with its bug planted.
"""

from __future__ import annotations

import itertools
import random
import re
import time

import numpy as np
import pytest
import torch
import transformers
from torch import nn
from training_helpers import ToyCollator, tiny_mlm, toy_examples

import course_lib.interop  # noqa: F401  (registers every family's conversions)
from course_lib.data import Document
from course_lib.data.pairs import _truncate_pair, make_nsp_examples
from course_lib.interop.core import from_transformers, to_transformers
from course_lib.tokenization import train_tokenizer
from course_lib.training import Trainer, TrainingConfig, load_checkpoint
from course_lib.training.checkpoint import read_state, save_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()


def make_docs(
    n_docs: int,
    seed: int = 0,
    sentences: tuple[int, int] = (4, 12),
    words: tuple[int, int] = (4, 14),
) -> list[Document]:
    """Documents whose every sentence starts with a marker dDxS (document D, sentence S)."""
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        text = [
            f"d{d}x{s} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(*words))) + "."
            for s in range(rng.randint(*sentences))
        ]
        docs.append(Document(title=f"doc{d}", sentences=text))
    return docs


DOCS = make_docs(40)


@pytest.fixture(scope="module")
def bert_tok():
    return train_tokenizer("bert", [d.text for d in DOCS], vocab_size=200)


def markers(tok, ids) -> list[tuple[int, int]]:
    return [(int(d), int(s)) for d, s in re.findall(r"d(\d+)x(\d+)", tok.decode(ids))]


def segments(tok, example) -> tuple[list[int], list[int]]:
    ids, types = example["input_ids"], example["token_type_ids"]
    a = [i for i, t in zip(ids, types) if t == 0 and i not in tok.special_ids]
    b = [i for i, t in zip(ids, types) if t == 1 and i not in tok.special_ids]
    return a, b


def make_trainer(model=None, steps=6, **overrides) -> Trainer:
    config = dict(
        max_steps=steps, batch_size=8, lr=3e-3, log_every=1, progress=False, precision="fp32"
    )
    config.update(overrides)
    return Trainer(
        model if model is not None else tiny_mlm(),
        toy_examples(64),
        ToyCollator(),
        TrainingConfig(**config),
        eval_dataset=toy_examples(16, seed=1),
    )


# --- 1. gradient clipping -----------------------------------------------------------------------


def test_clipping_bounds_the_gradient_the_optimizer_sees():
    """Bug: the Trainer computes the gradient norm (and logs it) but never clips."""
    limit = 1e-3
    seen: list[float] = []

    def spy_on(trainer: Trainer) -> Trainer:
        step = trainer.optimizer.step

        def spied(*args, **kwargs):
            grads = [p.grad for p in trainer.model.parameters() if p.grad is not None]
            seen.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))
            return step(*args, **kwargs)

        trainer.optimizer.step = spied
        return trainer

    clipped = spy_on(make_trainer(tiny_mlm(seed=2), steps=3, max_grad_norm=limit))
    history = clipped.train()
    assert len(seen) == 3
    assert all(r["grad_norm"] > 10 * limit for r in history)  # clipping had work to do
    assert max(seen) <= limit * (1 + 1e-4)
    # And the weights move differently from an unclipped run from the same start.
    free = make_trainer(tiny_mlm(seed=2), steps=3, max_grad_norm=None)
    free.train()
    assert any(
        not torch.equal(a, b)
        for a, b in zip(clipped.model.state_dict().values(), free.model.state_dict().values())
    )


# --- 2. layer_norm_eps survives interop ---------------------------------------------------------

EPS = 1e-3
HF_CONFIGS = {
    "BertForMaskedLM": lambda: transformers.BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=20,
        layer_norm_eps=EPS,
    ),
    "RobertaForMaskedLM": lambda: transformers.RobertaConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=24,
        layer_norm_eps=EPS,
        pad_token_id=1,
    ),
    "AlbertForMaskedLM": lambda: transformers.AlbertConfig(
        vocab_size=50,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=20,
        layer_norm_eps=EPS,
    ),
    "DebertaV2ForMaskedLM": lambda: transformers.DebertaV2Config(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=20,
        relative_attention=True,
        pos_att_type=["p2c", "c2p"],
        position_buckets=8,
        max_relative_positions=16,
        position_biased_input=False,
        norm_rel_ebd="layer_norm",
        type_vocab_size=0,
        layer_norm_eps=EPS,
    ),
}


@pytest.mark.parametrize("hf_class", HF_CONFIGS)
def test_a_non_default_layer_norm_eps_survives_conversion_both_ways(hf_class):
    """Bug: a family's interop does not copy layer_norm_eps (the default is used instead)."""
    torch.manual_seed(0)
    hf = getattr(transformers, hf_class)(HF_CONFIGS[hf_class]()).eval()
    ours = from_transformers(hf)
    assert ours.config.layer_norm_eps == EPS
    norms = [m for m in ours.modules() if isinstance(m, nn.LayerNorm)]
    assert norms and all(m.eps == EPS for m in norms)
    ids = torch.randint(5, 50, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        mine, theirs = ours(input_ids=ids).mlm_logits, hf(input_ids=ids).logits
    assert (mine - theirs).abs().max().item() < 1e-5
    back = to_transformers(ours)
    assert back.config.layer_norm_eps == EPS
    assert all(m.eps == EPS for m in back.modules() if isinstance(m, nn.LayerNorm))


def test_distilbert_keeps_the_only_eps_transformers_allows():
    """DistilBERT's eps is fixed in transformers (1e-12): every converted LayerNorm uses it."""
    torch.manual_seed(0)
    hf = transformers.DistilBertForMaskedLM(
        transformers.DistilBertConfig(
            vocab_size=50, dim=16, n_layers=2, n_heads=2, hidden_dim=24, max_position_embeddings=20
        )
    ).eval()
    ours = from_transformers(hf)
    assert ours.config.layer_norm_eps == 1e-12
    assert all(m.eps == 1e-12 for m in ours.modules() if isinstance(m, nn.LayerNorm))


# --- 3. NSP reads the unused continuation again -------------------------------------------------


def test_nsp_segments_cover_every_sentence_when_nothing_is_truncated(bert_tok):
    """Bug: after a NotNext example, NSP skips the real continuation it did not use."""
    examples = make_nsp_examples(DOCS, bert_tok, max_length=512, seed=0, short_seq_prob=0.0)
    assert examples.counts["truncated_tokens"] == 0
    covered = set()
    for ex in examples:
        a, b = segments(bert_tok, ex)
        covered.update(markers(bert_tok, a))
        if ex["next_sentence_label"] == 0:
            covered.update(markers(bert_tok, b))
    assert sum(ex["next_sentence_label"] for ex in examples) > 10  # NotNext happened
    every = {(d, s) for d, doc in enumerate(DOCS) for s in range(len(doc.sentences))}
    assert covered == every


# --- 4. resume keeps the clock ------------------------------------------------------------------


def test_resume_keeps_elapsed_time_and_the_minutes_schedule(tmp_path, monkeypatch):
    """Bug: resume resets elapsed_s to 0, so a minutes budget restarts (and its lr schedule)."""
    clock = itertools.count(0.0, 0.25)  # a fake clock: every reading is 0.25 s later
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock))
    budget = dict(steps=None, max_minutes=0.1, warmup=0.1)  # 6 s: 12 steps of 0.5 s
    full = make_trainer(tiny_mlm(seed=1), **budget)
    full.train()
    assert full.stop_reason == "time"

    first = make_trainer(tiny_mlm(seed=1), output_dir=str(tmp_path), **budget)
    first.callbacks.append(lambda t, r: t.request_stop() if t.step == 5 else None)
    first.train()
    saved = read_state(tmp_path / "checkpoint")["elapsed_s"]
    assert saved > 0

    second = make_trainer(tiny_mlm(seed=9), output_dir=str(tmp_path), **budget)
    second.resume(tmp_path / "checkpoint")
    assert second.elapsed_s == saved
    second.train()
    assert second.stop_reason == "time" and second.step == full.step
    assert second.elapsed_s < 60 * 0.1 + 1.0
    assert [r["lr"] for r in second.history] == pytest.approx([r["lr"] for r in full.history])


# --- 5. load_checkpoint restores the global RNG -------------------------------------------------


def test_load_checkpoint_restores_the_global_random_streams(tmp_path):
    """Bug: load_checkpoint does not restore the torch / random / numpy RNG states."""
    model = tiny_mlm()
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    save_checkpoint(tmp_path / "ckpt", model, state={"step": 1})
    expected = (random.random(), np.random.rand(), torch.rand(4))
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    load_checkpoint(tmp_path / "ckpt", tiny_mlm(seed=1))
    again = (random.random(), np.random.rand(), torch.rand(4))
    assert expected[0] == again[0]
    assert expected[1] == again[1]
    assert torch.equal(expected[2], again[2])


# --- 6. truncation trims both ends --------------------------------------------------------------


def test_truncation_trims_the_front_sometimes_and_the_back_sometimes():
    """Bug: truncation always trims the same end of the longer segment."""
    rng = random.Random(0)
    lost_first = lost_last = 0
    for trial in range(200):
        n_a, n_b = rng.randint(3, 20), rng.randint(3, 20)
        a = (list(range(n_a)), list(range(n_a)))
        b = (list(range(100, 100 + n_b)), list(range(n_b)))
        original = (list(a[0]), list(b[0]))
        budget = max(2, (n_a + n_b) // 2)
        removed = _truncate_pair(a, b, budget, random.Random(trial))
        assert removed == n_a + n_b - budget == len(original[0]) + len(original[1]) - budget
        assert len(a[0]) >= 1 and len(b[0]) >= 1
        for kept, full in ((a[0], original[0]), (b[0], original[1])):
            if len(kept) < len(full):
                start = full.index(kept[0])
                assert full[start : start + len(kept)] == kept  # a contiguous middle is kept
                lost_first += start > 0
                lost_last += start + len(kept) < len(full)
    assert lost_first > 50 and lost_last > 50


# --- 7. NotNext B never from A's document -------------------------------------------------------


def test_random_b_never_comes_from_a_s_own_document(bert_tok):
    """Bug: the random B of NSP may be drawn from A's own document. With 4 documents such a
    draw would happen about once in four NotNext examples, so thousands leave no doubt."""
    docs = make_docs(4, seed=1, sentences=(350, 450), words=(1, 3))  # short: markers survive
    not_next = 0
    for seed in range(6):
        for ex in make_nsp_examples(docs, bert_tok, max_length=20, seed=seed, short_seq_prob=0.2):
            if ex["next_sentence_label"] != 1:
                continue
            a, b = segments(bert_tok, ex)
            docs_a = {d for d, _ in markers(bert_tok, a)}
            docs_b = {d for d, _ in markers(bert_tok, b)}
            if docs_a and docs_b:
                not_next += 1
                assert not docs_a & docs_b, ex
    assert not_next >= 2000
