"""Replaced-token detection (ELECTRA, Clark et al. 2020): a generator fills the masked positions,
a discriminator says for every token whether it is the original or a replacement.

One training step, as in the paper's section 2 and its released code:

1. mask ~15% of the tokens (`ELECTRA_MASKING`: 85% of them become [MASK], 15% stay; no random
   tokens, the generator provides those);
2. the generator (a small MLM) predicts the masked tokens: loss L_mlm on the masked positions;
3. one token per masked position is *sampled* from the generator's softmax. Sampling is not
   differentiable, so no gradient flows from the discriminator back into the generator: the
   generator is trained by L_mlm alone (section 2: "we do not back-propagate the discriminator
   loss through the generator");
4. the discriminator reads the corrupted sequence; label 1 where the token differs from the
   original, 0 elsewhere (a sample equal to the original counts as original): loss L_disc, a
   binary cross-entropy over *every* real token, not only the 15% masked;
5. L = L_mlm + lambda * L_disc with lambda = 50 (the discriminator's per-token loss is far
   smaller than the generator's cross-entropy over the vocabulary).

The generator and discriminator share their token and position embeddings (section 3.2): the
generator's MLM gradient teaches the embeddings about every word in the vocabulary, while the
discriminator only updates the embeddings of the tokens it sees.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.config.electra import ElectraConfig, generator_config
from course_lib.models.electra import ElectraForMaskedLM, ElectraForPreTraining
from course_lib.models.outputs import ModelOutput
from course_lib.objectives.masking import IGNORE_INDEX, MaskingConfig

DISCRIMINATOR_WEIGHT = 50.0  # lambda of the paper (its appendix A: pretraining details)
ELECTRA_MASKING = MaskingConfig(
    mlm_probability=0.15, mask_replace_prob=0.85, random_replace_prob=0.0
)
SHARED_EMBEDDINGS = ("word_embeddings", "position_embeddings", "token_type_embeddings", "LayerNorm")


def sample_replacements(
    logits: Tensor, generator: torch.Generator | None = None, temperature: float = 1.0
) -> Tensor:
    """One token id per row of `logits` ([n, V]), drawn from softmax(logits / temperature).

    The draw is made on detached logits: nothing the discriminator does can send a gradient back
    through it (sampling has none), so the generator learns from its own MLM loss only.
    """
    probs = torch.softmax(logits.detach().float() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def corrupt(input_ids: Tensor, labels: Tensor, sampled: Tensor) -> tuple[Tensor, Tensor]:
    """The discriminator's input and labels from a masked batch and the generator's samples.

    `labels` holds the original token at masked positions and IGNORE_INDEX elsewhere; `sampled`
    one token per masked position, in row-major order (as `labels != IGNORE_INDEX` selects
    them). Returns (corrupted ids, 0/1 labels: 1 where the token is not the original).
    """
    masked = labels != IGNORE_INDEX
    if sampled.shape != (int(masked.sum()),):
        raise ValueError(
            f"sampled has shape {tuple(sampled.shape)}; expected one token per masked position "
            f"({int(masked.sum())})."
        )
    original = torch.where(masked, labels, input_ids)
    corrupted = input_ids.clone()
    corrupted[masked] = sampled
    return corrupted, (corrupted != original).long()


def rtd_loss(mlm_loss: Tensor, disc_loss: Tensor, weight: float = DISCRIMINATOR_WEIGHT) -> Tensor:
    """ELECTRA's combined loss: L_mlm + weight * L_disc."""
    return mlm_loss + weight * disc_loss


def share_embeddings(generator: ElectraForMaskedLM, discriminator: ElectraForPreTraining) -> None:
    """Make the generator use the discriminator's token, position and segment embeddings (and
    their LayerNorm): the same modules, so one tensor each. Each model keeps its own E -> H
    projection (their hidden sizes differ). The generator's decoder is re-tied to the shared
    table."""
    gen, disc = generator.config, discriminator.config
    for field in ("vocab_size", "embedding_size", "max_position_embeddings", "type_vocab_size"):
        if getattr(gen, field) != getattr(disc, field):
            raise ValueError(
                f"the generator and discriminator must agree on {field} to share embeddings; "
                f"got {getattr(gen, field)} and {getattr(disc, field)}. Build the generator with "
                "course_lib.config.electra.generator_config(discriminator_config)."
            )
    for name in SHARED_EMBEDDINGS:
        setattr(
            generator.backbone.embeddings, name, getattr(discriminator.backbone.embeddings, name)
        )
    generator.tie_weights()


class GDESEmbedding(nn.Module):
    """DeBERTa-v3's gradient-disentangled embedding sharing (He et al. 2021, section 3): the
    discriminator's token table is sg(E_G) + E_delta, the generator's table behind a
    stop-gradient plus a residual that starts at zero. The generator's MLM loss alone trains
    E_G; the discriminator's loss trains only E_delta (no tug-of-war over one table)."""

    def __init__(self, generator_table: nn.Embedding) -> None:
        super().__init__()
        self.generator_table = generator_table  # E_G: trained by the generator's loss only
        self.delta = nn.Parameter(torch.zeros_like(generator_table.weight))  # E_delta

    def forward(self, ids: Tensor) -> Tensor:
        table = self.generator_table.weight.detach() + self.delta  # the stop-gradient
        return F.embedding(ids, table)


@dataclass
class RTDOutput(ModelOutput):
    """ModelOutput plus what one RTD step produced: `mlm_loss` (generator), `disc_loss`,
    the discriminator's input and labels, its `logits` ([batch, seq]) and the samples."""

    disc_loss: Tensor | None = None
    disc_input_ids: Tensor | None = None
    disc_labels: Tensor | None = None
    sampled: Tensor | None = None


class ElectraPretrainer(nn.Module):
    """Generator + discriminator with shared embeddings, trained together by `forward`'s loss.

    `forward` takes a masked batch (input_ids with [MASK]s, labels = originals at masked
    positions, -100 elsewhere, as `PretrainingCollator` makes with `ELECTRA_MASKING`) and returns
    an RTDOutput whose `loss` is L_mlm + weight * L_disc. After training, keep
    `self.discriminator` (fine-tune its encoder); the generator is thrown away.
    """

    def __init__(
        self,
        generator: ElectraForMaskedLM,
        discriminator: ElectraForPreTraining,
        weight: float = DISCRIMINATOR_WEIGHT,
        tie_embeddings: bool = True,
    ) -> None:
        super().__init__()
        self.generator, self.discriminator, self.weight = generator, discriminator, weight
        if tie_embeddings:
            share_embeddings(generator, discriminator)
        self.config = discriminator.config  # what the engine and checkpoints read

    @classmethod
    def from_config(
        cls,
        config: ElectraConfig,
        generator: float | ElectraConfig | None = None,
        weight: float = DISCRIMINATOR_WEIGHT,
    ) -> ElectraPretrainer:
        """A fresh generator + discriminator for the discriminator `config`: `generator` is the
        generator's config, or its size as a fraction of the discriminator's (default 1/4, as
        ELECTRA-Small; see config.electra.generator_config)."""
        if not isinstance(generator, ElectraConfig):
            generator = generator_config(config, 0.25 if generator is None else generator)
        return cls(ElectraForMaskedLM(generator), ElectraForPreTraining(config), weight)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        sample_generator: torch.Generator | None = None,
    ) -> RTDOutput:
        if labels is None:
            raise ValueError(
                "ElectraPretrainer needs labels (the original tokens at masked positions, -100 "
                "elsewhere): mask the batch with a PretrainingCollator first."
            )
        gen = self.generator(input_ids, attention_mask, token_type_ids, labels=labels)
        sampled = sample_replacements(gen.mlm_logits, sample_generator)
        corrupted, disc_labels = corrupt(input_ids, labels, sampled)
        disc = self.discriminator(corrupted, attention_mask, token_type_ids, labels=disc_labels)
        return RTDOutput(
            loss=rtd_loss(gen.mlm_loss, disc.loss, self.weight),
            mlm_loss=gen.mlm_loss,
            mlm_logits=gen.mlm_logits,
            mlm_positions=gen.mlm_positions,
            logits=disc.logits,
            disc_loss=disc.loss,
            disc_input_ids=corrupted,
            disc_labels=disc_labels,
            sampled=sampled,
        )


class RTDObjective:
    """The Trainer objective for an ElectraPretrainer: exact under gradient accumulation, since
    L_mlm is weighted by each micro-batch's share of masked tokens and L_disc by its share of
    real tokens (see engine.ExactObjective). Metrics: both losses, the discriminator's accuracy
    and the share of real tokens that were replaced."""

    def target_counts(self, batch: dict[str, Tensor]) -> dict[str, float]:
        counts = {"mlm": float((batch["labels"] != IGNORE_INDEX).sum())}
        mask = batch.get("attention_mask")
        counts["tokens"] = float(mask.sum()) if mask is not None else float(batch["labels"].numel())
        return counts

    def __call__(
        self,
        model: ElectraPretrainer,
        batch: dict[str, Tensor],
        shares: dict[str, float] | None = None,
    ) -> tuple[Tensor, dict[str, Tensor]]:
        inputs = ("input_ids", "attention_mask", "token_type_ids", "labels")
        out = model(**{k: v for k, v in batch.items() if k in inputs})
        mask = batch.get("attention_mask")
        real = (
            mask.bool() if mask is not None else torch.ones_like(out.disc_labels, dtype=torch.bool)
        )
        with torch.no_grad():
            hits = ((out.logits > 0).long() == out.disc_labels)[real].float().mean()
            replaced = out.disc_labels[real].float().mean()
        weight = getattr(model, "weight", DISCRIMINATOR_WEIGHT)
        if shares is None:
            mlm, disc, loss = out.mlm_loss, out.disc_loss, out.loss
        else:
            mlm, disc = out.mlm_loss * shares["mlm"], out.disc_loss * shares["tokens"]
            hits, replaced = hits * shares["tokens"], replaced * shares["tokens"]
            loss = rtd_loss(mlm, disc, weight)
        metrics = {
            "mlm_loss": mlm.detach(),
            "disc_loss": disc.detach(),
            "disc_accuracy": hits,
            "replaced": replaced,
        }
        return loss, metrics
