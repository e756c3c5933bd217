"""Replaced-token detection: sampling, labels, the combined loss, shared embeddings, no gradient
through sampling, and training with the course's Trainer."""

import pytest
import torch

from course_lib.config.electra import ElectraConfig, generator_config
from course_lib.counting import count_parameters
from course_lib.models.electra import ElectraForMaskedLM, ElectraForPreTraining
from course_lib.objectives.masking import IGNORE_INDEX
from course_lib.objectives.rtd import (
    DISCRIMINATOR_WEIGHT,
    ELECTRA_MASKING,
    SHARED_EMBEDDINGS,
    ElectraPretrainer,
    RTDObjective,
    corrupt,
    rtd_loss,
    sample_replacements,
)

VOCAB = 61


def pretrainer(seed=0, **changes):
    torch.manual_seed(seed)
    sizes = dict(
        vocab_size=VOCAB,
        embedding_size=16,
        hidden_size=32,
        num_attention_heads=4,
        num_hidden_layers=2,
        intermediate_size=64,
        max_position_embeddings=24,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    disc = ElectraConfig(**{**sizes, **changes})
    gen = generator_config(disc, 0.5)
    return ElectraPretrainer(ElectraForMaskedLM(gen), ElectraForPreTraining(disc))


def masked_batch(seed=1, rows=4, seq=11):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (rows, seq), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[rows - 1, 4:] = 0
    ids[mask == 0] = 0
    pick = (torch.rand(ids.shape, generator=g) < 0.3) & mask.bool()
    pick[0, 1] = True  # at least one masked token
    labels = torch.where(pick, ids, torch.full_like(ids, IGNORE_INDEX))
    masked_ids = torch.where(pick, torch.full_like(ids, 4), ids)  # 4 plays [MASK]
    return dict(input_ids=masked_ids, attention_mask=mask, labels=labels), ids


def test_corrupt_labels_every_token_and_treats_a_correct_sample_as_original():
    ids = torch.tensor([[7, 8, 9, 10], [11, 12, 13, 14]])
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[0, 1], labels[1, 0], labels[1, 3] = 8, 11, 14
    masked = ids.clone()
    masked[labels != IGNORE_INDEX] = 4
    sampled = torch.tensor([30, 11, 2])  # row-major: (0,1) replaced, (1,0) = original, (1,3)
    corrupted, disc_labels = corrupt(masked, labels, sampled)
    assert corrupted.tolist() == [[7, 30, 9, 10], [11, 12, 13, 2]]
    assert disc_labels.tolist() == [[0, 1, 0, 0], [0, 0, 0, 1]]
    with pytest.raises(ValueError, match="one token per masked position"):
        corrupt(masked, labels, sampled[:2])


def test_sampling_follows_the_softmax_and_carries_no_gradient():
    logits = torch.tensor([[2.0, 0.0, -1.0, 1.0]], requires_grad=True)
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([sample_replacements(logits, g) for _ in range(4000)]).flatten()
    freq = torch.bincount(draws, minlength=4).float() / len(draws)
    assert (freq - torch.softmax(logits.detach(), -1)[0]).abs().max() < 0.03
    assert not draws.requires_grad and draws.dtype == torch.long


def test_loss_is_mlm_plus_50_times_discriminator():
    model = pretrainer()
    batch, _ = masked_batch()
    torch.manual_seed(5)
    out = model(**batch)
    assert DISCRIMINATOR_WEIGHT == 50.0
    assert torch.allclose(out.loss, out.mlm_loss + 50.0 * out.disc_loss)
    assert torch.equal(rtd_loss(out.mlm_loss, out.disc_loss), out.loss)
    # the discriminator's loss is over every real token: recompute it by hand
    real = batch["attention_mask"].bool()
    by_hand = torch.nn.functional.binary_cross_entropy_with_logits(
        out.logits[real], out.disc_labels[real].float()
    )
    assert torch.allclose(out.disc_loss, by_hand)
    assert out.logits.shape == batch["input_ids"].shape
    # unmasked positions are untouched, masked ones hold the samples
    masked = batch["labels"] != IGNORE_INDEX
    assert torch.equal(out.disc_input_ids[~masked], batch["input_ids"][~masked])
    assert torch.equal(out.disc_input_ids[masked], out.sampled)


def test_embeddings_are_shared_and_decoder_tied():
    model = pretrainer()
    gen, disc = model.generator.backbone.embeddings, model.discriminator.backbone.embeddings
    for name in SHARED_EMBEDDINGS:
        assert getattr(gen, name) is getattr(disc, name)
    assert gen.projection is not disc.projection  # E -> 16 and E -> 32: each model its own
    assert model.generator.mlm_head.decoder.weight is disc.word_embeddings.weight
    # parameters counted once: both models minus the shared embedding tensors
    shared = sum(p.numel() for n in SHARED_EMBEDDINGS for p in getattr(disc, n).parameters())
    separate = sum(
        count_parameters(m.config, type(m))["total"] for m in (model.generator, model.discriminator)
    )
    assert sum(p.numel() for p in model.parameters()) == separate - shared


def test_mismatched_generator_is_refused():
    disc = ElectraForPreTraining(ElectraConfig(vocab_size=VOCAB, num_hidden_layers=1))
    gen = ElectraForMaskedLM(
        ElectraConfig(vocab_size=VOCAB, num_hidden_layers=1, embedding_size=64)
    )
    with pytest.raises(ValueError, match="embedding_size"):
        ElectraPretrainer(gen, disc)


def test_no_gradient_reaches_the_generator_from_the_discriminator_loss():
    model = pretrainer()
    batch, _ = masked_batch()
    out = model(**batch)
    out.disc_loss.backward()
    gen_only = [
        p
        for n, p in model.generator.named_parameters()
        if not any(n.startswith(f"backbone.embeddings.{s}") for s in SHARED_EMBEDDINGS)
        and "decoder.weight" not in n
    ]
    assert gen_only and all(p.grad is None for p in gen_only)
    # ...while the shared embeddings and the discriminator do get it
    assert model.discriminator.backbone.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    assert model.discriminator.discriminator_head.dense.weight.grad.abs().sum() > 0
    model.zero_grad()
    model(**batch).mlm_loss.backward()
    assert model.generator.mlm_head.dense.weight.grad.abs().sum() > 0


def test_objective_shares_make_accumulation_exact():
    """Two micro-batches weighted by their shares add up to the means over all their targets."""
    model, objective = pretrainer(), RTDObjective()
    a, _ = masked_batch(seed=1)
    b, _ = masked_batch(seed=2, rows=3)
    counts = [objective.target_counts(x) for x in (a, b)]
    total = {k: counts[0][k] + counts[1][k] for k in counts[0]}
    parts, weighted = [], []
    for x, c in zip((a, b), counts):
        torch.manual_seed(9)
        parts.append(model(**x))
        torch.manual_seed(9)
        loss, _ = objective(model, x, shares={k: c[k] / total[k] for k in c})
        weighted.append(loss)
    mlm = sum(p.mlm_loss * c["mlm"] for p, c in zip(parts, counts)) / total["mlm"]
    disc = sum(p.disc_loss * c["tokens"] for p, c in zip(parts, counts)) / total["tokens"]
    assert torch.allclose(sum(weighted), mlm + 50.0 * disc, atol=1e-5)
    assert counts[0]["tokens"] == float(a["attention_mask"].sum())


def test_trains_with_the_course_trainer(one_thread):
    from course_lib.data import PretrainingCollator
    from course_lib.tokenization import train_tokenizer
    from course_lib.training import Trainer, TrainingConfig

    texts = [f"the {w} reads the {v} and writes the {w} back" for w in "abcdefgh" for v in "xyz"]
    tokenizer = train_tokenizer("wordpiece", texts, vocab_size=60)
    examples = [{"input_ids": tokenizer.encode(t)["input_ids"]} for t in texts]
    model = pretrainer(vocab_size=tokenizer.vocab_size)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    config = TrainingConfig(max_steps=4, batch_size=8, lr=1e-3, log_every=1, progress=False)
    trainer = Trainer(
        model,
        examples,
        PretrainingCollator(tokenizer, ELECTRA_MASKING),
        config,
        objective=RTDObjective(),
    )
    history = trainer.train()
    assert len(history) == 4 and all("train_disc_accuracy" in r for r in history)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert any(n.startswith("generator.backbone.encoder") for n in changed)
    assert any(n.startswith("discriminator.backbone.encoder") for n in changed)
    emb = model.discriminator.backbone.embeddings.word_embeddings
    assert model.generator.backbone.embeddings.word_embeddings is emb
    assert model.generator.mlm_head.decoder.weight is emb.weight
