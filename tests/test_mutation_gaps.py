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
from training_helpers import ToyCollator, tiny_config, tiny_mlm, toy_examples

import course_lib.interop  # noqa: F401  (registers every family's conversions)
from course_lib.data import Document
from course_lib.data.pairs import make_nsp_examples, truncate_pair
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
    """Bug: BERT's random-ends truncation always trims the same end of the longer segment.
    (The course's default keeps the A|B junction instead: tests/test_pairs.py.)"""
    rng = random.Random(0)
    lost_first = lost_last = 0
    for trial in range(200):
        n_a, n_b = rng.randint(3, 20), rng.randint(3, 20)
        a = (list(range(n_a)), list(range(n_a)))
        b = (list(range(100, 100 + n_b)), list(range(n_b)))
        original = (list(a[0]), list(b[0]))
        budget = max(2, (n_a + n_b) // 2)
        removed, _ = truncate_pair(a, b, budget, "random", random.Random(trial))
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


# --- survivors of the first mutation run (docs/mutation.md) --------------------------------------


def test_deberta_position_dropout_acts_in_training_only():
    """Bug: the relative embeddings skip their dropout (transformers applies pos_dropout)."""
    from course_lib.models.deberta import DebertaConfig, DebertaModel

    config = DebertaConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=20,
        position_buckets=8,
        max_relative_positions=16,
        hidden_dropout_prob=0.5,
        attention_probs_dropout_prob=0.0,
    )
    model = DebertaModel(config)
    attention = model.encoder.layers[0].attention
    table, distances = model.encoder.relative_inputs(7, torch.device("cpu"))
    hidden = torch.randn(1, 7, 16)

    def terms(seed: int) -> dict[str, torch.Tensor]:
        torch.manual_seed(seed)
        with torch.no_grad():
            return attention.score_terms(hidden, table, distances)

    attention.train()
    one, two = terms(1), terms(2)
    assert torch.equal(one["c2c"], two["c2c"])  # no dropout on the content term
    assert not torch.equal(one["c2p"], two["c2p"]) and not torch.equal(one["p2c"], two["p2c"])
    attention.eval()
    assert torch.equal(terms(1)["c2p"], terms(2)["c2p"])


def test_initializer_range_sets_the_spread_of_every_weight():
    """Bug: some layers ignore initializer_range (a fixed 0.02 std)."""
    model = tiny_mlm(initializer_range=0.2, hidden_size=64, intermediate_size=128)
    for name, param in model.named_parameters():
        if param.dim() == 2:  # Linear and Embedding weights: N(0, initializer_range)
            assert 0.17 < param.std().item() < 0.23, name
        elif name.endswith("LayerNorm.weight") or name.endswith("norm.weight"):
            assert torch.equal(param, torch.ones_like(param)), name
        else:  # biases and LayerNorm shifts start at zero
            assert torch.equal(param, torch.zeros_like(param)), name


FIELD_CHECKS = {
    # transformers class: (config kwargs, {our field: value it must carry})
    "BertForMaskedLM": (
        dict(hidden_dropout_prob=0.15, attention_probs_dropout_prob=0.25, initializer_range=0.05),
        dict(hidden_dropout_prob=0.15, attention_probs_dropout_prob=0.25, initializer_range=0.05),
    ),
    "RobertaForSequenceClassification": (
        dict(
            hidden_dropout_prob=0.15,
            attention_probs_dropout_prob=0.25,
            classifier_dropout=0.35,
            pad_token_id=1,
        ),
        dict(hidden_dropout_prob=0.15, attention_probs_dropout_prob=0.25, classifier_dropout=0.35),
    ),
    "AlbertForSequenceClassification": (
        dict(
            hidden_dropout_prob=0.15,
            attention_probs_dropout_prob=0.25,
            classifier_dropout_prob=0.35,
            embedding_size=8,
        ),
        dict(
            hidden_dropout_prob=0.15,
            attention_probs_dropout_prob=0.25,
            classifier_dropout_prob=0.35,
        ),
    ),
    "DistilBertForSequenceClassification": (
        dict(dropout=0.15, attention_dropout=0.25, seq_classif_dropout=0.35, qa_dropout=0.45),
        dict(
            hidden_dropout_prob=0.15,
            attention_probs_dropout_prob=0.25,
            seq_classif_dropout=0.35,
            qa_dropout=0.45,
        ),
    ),
}
SIZES = {
    "DistilBertForSequenceClassification": dict(
        vocab_size=50, dim=16, n_layers=2, n_heads=2, hidden_dim=24, max_position_embeddings=24
    ),
}


@pytest.mark.parametrize("hf_class", FIELD_CHECKS)
def test_conversion_keeps_every_config_field(hf_class):
    """Bug: a conversion swaps or drops a config field that eval-mode parity cannot see (the
    dropout rates)."""
    kwargs, expected = FIELD_CHECKS[hf_class]
    sizes = SIZES.get(hf_class) or dict(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=24,
    )
    config_class = getattr(transformers, hf_class.split("For")[0] + "Config")
    hf = getattr(transformers, hf_class)(config_class(**sizes, **kwargs)).eval()
    ours = from_transformers(hf)
    for field, value in expected.items():
        assert getattr(ours.config, field) == value, field
    back = to_transformers(ours).config
    for field, value in kwargs.items():
        assert getattr(back, field) == value, field


class FixedMaskCollator(ToyCollator):
    """Masks chosen by each example's own content, whatever the generator, so that a batch split
    into micro-batches has the same targets as the whole. `vary=False`: word positions 2, 5 and 8
    of every row (equal counts); `vary=True`: every position p with (p + length) % 4 == 0 (the
    count differs from example to example)."""

    def __init__(self, vary: bool = False):
        super().__init__()
        self.vary = vary

    def __call__(self, examples, generator=None):
        batch = super().__call__(examples, generator=torch.Generator().manual_seed(0))
        ids, labels = batch["input_ids"], batch["labels"]
        original = torch.where(labels != -100, labels, ids)
        chosen = torch.zeros_like(ids, dtype=torch.bool)
        for row, example in enumerate(examples):
            n = len(example["input_ids"])
            if self.vary:
                chosen[row, 1 : n - 1] = (torch.arange(1, n - 1) + n) % 4 == 0
            else:
                chosen[row, [2, 5, 8]] = True
        batch["labels"] = torch.where(chosen, original, torch.full_like(ids, -100))
        batch["input_ids"] = original.masked_fill(chosen, 3)
        return batch


def test_accumulation_averages_the_micro_batches():
    """Bugs: accumulated gradients are summed, not averaged, or weighted by the wrong count
    (AdamW hides a constant factor in the weights; the gradient norm shows it)."""
    from course_lib.training.engine import ModelLoss

    def first_grad_norm(batch_size, accumulation, collator, objective=None) -> float:
        trainer = Trainer(
            tiny_mlm(seed=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
            toy_examples(32),
            collator,
            TrainingConfig(
                max_steps=1,
                batch_size=batch_size,
                gradient_accumulation_steps=accumulation,
                max_grad_norm=None,
                progress=False,
            ),
            objective=objective,
        )
        return trainer.train()[0]["grad_norm"]

    # The default objective is exact: micro-batches with different numbers of masked tokens
    # are weighted by their share of the step's targets.
    varying, equal = FixedMaskCollator(vary=True), FixedMaskCollator()
    assert first_grad_norm(8, 2, varying) == pytest.approx(
        first_grad_norm(16, 1, varying), rel=1e-4
    )
    # A plain objective (no target counts) is averaged over micro-batches: exact when every
    # micro-batch has the same number of targets.
    plain = lambda model, batch: ModelLoss()(model, batch)  # noqa: E731
    assert first_grad_norm(8, 2, equal, plain) == pytest.approx(
        first_grad_norm(16, 1, equal, plain), rel=1e-4
    )


def test_evaluation_every_minutes_follows_the_clock(monkeypatch):
    """Bug: once the first interval has passed, a minutes schedule evaluates at every step."""
    clock = itertools.count(0.0, 0.25)  # every reading 0.25 s later: 0.5 s per logged step
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock))
    trainer = make_trainer(steps=12, eval_every_minutes=2.0 / 60)
    history = trainer.train()
    assert [r["step"] for r in history if "eval_mlm_loss" in r] == [4, 8, 12]


def test_dropout_depends_only_on_the_seed_and_the_step():
    """Bug: dropout is not re-seeded per micro-batch, so it follows whatever the global RNG
    held (another rank, or code run before training, changes the run)."""
    weights = []
    for outside in (100, 200):
        trainer = make_trainer(tiny_mlm(seed=1), steps=3)  # dropout 0.1
        torch.manual_seed(outside)
        trainer.train()
        weights.append(trainer.model.state_dict())
    for name, value in weights[0].items():
        assert torch.equal(value, weights[1][name]), name


def test_tokens_without_a_word_are_masked_one_by_one():
    """Bug: whole-word units ignore word id -1, so neighbouring tokens that belong to no word
    (and are not special) are masked together as if they were one word."""
    from course_lib.objectives.masking import IGNORE_INDEX, MaskingConfig, mask_tokens

    ids = torch.randint(5, 100, (400, 12), generator=torch.Generator().manual_seed(0))
    words = torch.full_like(ids, -1)  # no token belongs to a word
    special = torch.zeros_like(ids, dtype=torch.bool)
    config = MaskingConfig(mlm_probability=0.5, whole_word=True)
    _, labels = mask_tokens(
        ids, special, 4, 100, config, torch.Generator().manual_seed(1), word_ids=words
    )
    per_row = (labels != IGNORE_INDEX).sum(1)
    assert ((per_row > 0) & (per_row < 12)).float().mean() > 0.9  # not all-or-nothing rows


def test_joined_sentences_keep_their_words_apart(bert_tok):
    """Bug: word ids of joined sentences collide (the last word of one sentence and the first
    of the next share an id, so whole-word masking treats them as one word)."""
    from course_lib.data.pairs import concat_segments

    joined = concat_segments([([5, 6, 7], [0, 1, 1]), ([8], [0]), ([9, 10], [0, 1])])
    assert joined[1] == [0, 1, 1, 2, 3, 4]
    for ex in make_nsp_examples(DOCS[:6], bert_tok, max_length=64, seed=0):
        tokens = bert_tok.convert_ids_to_tokens(ex["input_ids"])
        for j in range(1, len(tokens)):
            word, before = ex["word_ids"][j], ex["word_ids"][j - 1]
            if word >= 0 and before >= 0:  # same id exactly when a ## piece continues the word
                assert (word == before) == tokens[j].startswith("##"), tokens[j - 1 : j + 1]


def test_pad_to_multiple_of_pads_to_the_smallest_multiple(bert_tok):
    """Bug: pad_to_multiple_of adds a whole block even when the width already is a multiple."""
    from course_lib.data.collator import PretrainingCollator

    rows = [{"input_ids": [2] + [10] * n + [3]} for n in (5, 14)]  # widths 7 and 16
    for multiple, width in ((8, 16), (16, 16), (5, 20), (1, 16)):
        batch = PretrainingCollator(bert_tok, masking=None, pad_to_multiple_of=multiple)(rows)
        assert batch["input_ids"].shape[1] == width, multiple


def test_the_validation_split_depends_on_the_seed():
    """Bug: the document ranking ignores the seed, so every seed gives the same split."""
    from course_lib.data.corpus import split_documents

    docs = make_docs(60)
    splits = [{d.title for d in split_documents(docs, 0.2, seed)[1]} for seed in range(4)]
    assert all(len(s) == 12 for s in splits)
    assert splits[0] == {d.title for d in split_documents(docs, 0.2, 0)[1]}  # repeatable
    assert len({frozenset(s) for s in splits}) == 4  # and different for every seed


def test_pre_ln_layer_and_stack_follow_the_formula():
    """Bugs: a pre-LN sublayer reads the un-normalised stream, or the pre-LN stack forgets its
    final LayerNorm. x' = x + Attn(LN1(x)); out = x' + FFN(LN2(x')); stack: LN_f(last layer)."""
    from course_lib.modules.encoder import Encoder

    config = tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    assert config.pre_layer_norm
    torch.manual_seed(0)
    encoder = Encoder(config).eval()
    with torch.no_grad():
        for p in encoder.parameters():  # away from the init (LN gains 1, biases 0)
            p.add_(0.3 * torch.randn_like(p))
    x = 3 * torch.randn(2, 6, 32)
    layer = encoder.layers[0]
    with torch.no_grad():
        h = x + layer.attention(layer.attention_norm(x))[0]
        expected = h + layer.feed_forward(layer.output_norm(h))
        assert torch.allclose(layer(x)[0], expected, atol=1e-5)
        out, hidden_states, _ = encoder(x, output_hidden_states=True)
        assert torch.allclose(out, encoder.final_norm(hidden_states[-1]), atol=1e-6)
        assert not torch.allclose(out, hidden_states[-1], atol=1e-2)


def test_one_label_means_regression_with_mean_squared_error():
    """Bug: num_labels=1 (regression) is not recognised and goes to cross-entropy."""
    from course_lib.models import BertForSequenceClassification

    model = BertForSequenceClassification(tiny_config(num_labels=1)).eval()
    ids = torch.randint(4, 64, (3, 7), generator=torch.Generator().manual_seed(0))
    targets = torch.tensor([0.5, -1.0, 2.0])
    out = model(input_ids=ids, labels=targets)
    assert out.logits.shape == (3, 1)
    assert torch.allclose(out.loss, ((out.logits.squeeze(-1) - targets) ** 2).mean())
