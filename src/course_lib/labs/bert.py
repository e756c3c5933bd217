"""Mechanism labs of chapter 01 (BERT).

bidirectional_context: BERT's "deep bidirectional" claim on a language built so that half the
tokens can be recovered only from their right neighbour. The two arms are the same model, the
same data and the same masked-LM loss; the left-to-right arm only adds a causal attention mask
(position i may attend to positions <= i), so the difference is exactly what the paper changed
relative to OpenAI GPT.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib.config import BertConfig
from course_lib.labels import IGNORE_INDEX
from course_lib.labs.core import Lab, choose, fit, register, seed_everything, tiny_config
from course_lib.models.bert import BertForMaskedLM

# Vocabulary of the pair language: ids 0..3 are special, content tokens are 4..4+N_CONTENT-1.
PAD, MASK = 0, 1
N_SPECIAL = 4
N_CONTENT = 32


def sample_pairs(perm: Tensor, batch: int, pairs: int, generator: torch.Generator) -> Tensor:
    """(batch, 2 * pairs) ids of the pair language: pairs (a, b) with b uniform and a = perm[b].
    The first token of each pair is a function of the token to its RIGHT and independent of
    everything to its left; the second is a function of its left neighbour (perm is a bijection)."""
    b = torch.randint(0, len(perm), (batch, pairs), generator=generator)
    return torch.stack([perm[b], b], dim=-1).reshape(batch, 2 * pairs) + N_SPECIAL


def mask_positions(
    ids: Tensor, generator: torch.Generator, rate: float = 0.15
) -> tuple[Tensor, Tensor]:
    """Replace ~`rate` of the tokens by [MASK] (at least one per row) -> (inputs, labels)."""
    chosen = torch.rand(ids.shape, generator=generator) < rate
    chosen[torch.arange(ids.shape[0]), torch.randint(0, ids.shape[1], (ids.shape[0],))] = True
    inputs = ids.masked_fill(chosen, MASK)
    labels = ids.masked_fill(~chosen, IGNORE_INDEX)
    return inputs, labels


def causal_keep_mask(length: int, device: torch.device) -> Tensor:
    """(1, 1, T, T) boolean keep-mask: query i may attend to keys j <= i (left-to-right)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]


def mlm_logits(model: BertForMaskedLM, inputs: Tensor, left_to_right: bool) -> Tensor:
    """(B, T, V) masked-LM logits; the left-to-right arm passes a causal mask to the encoder."""
    if left_to_right:  # the backbone's own forward, with a causal keep-mask instead of padding's
        x = model.backbone.embeddings(inputs, None)  # (B, T, H)
        x, _, _ = model.backbone.encoder(x, causal_keep_mask(inputs.shape[1], inputs.device))
    else:
        x = model.backbone(inputs).last_hidden_state  # (B, T, H)
    return model.mlm_head(x)  # (B, T, V)


def _right_context_accuracy(
    seed: int, left_to_right: bool, steps: int, batch: int, device: torch.device
) -> float:
    """Train one arm on the seed's pair language; accuracy on held-out first-of-pair tokens."""
    pairs = 4
    perm = torch.randperm(N_CONTENT, generator=torch.Generator().manual_seed(10_000 + seed))
    generator = seed_everything(seed)  # same data stream and same initial weights in both arms
    # One layer suffices (attend to the neighbour, read out perm); init 0.1 instead of BERT's
    # 0.02 shortens the plateau before attention finds the neighbour (~60 steps instead of ~300).
    config = tiny_config(
        BertConfig, N_SPECIAL + N_CONTENT, layers=1, max_positions=2 * pairs, initializer_range=0.1
    )
    model = BertForMaskedLM(config).to(device)

    def step_loss(_step: int) -> Tensor:
        inputs, labels = mask_positions(sample_pairs(perm, batch, pairs, generator), generator)
        logits = mlm_logits(model, inputs.to(device), left_to_right)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), labels.to(device).flatten())

    fit(model, step_loss, steps, lr=5e-3)
    # Held out: mask exactly one first-of-pair token per sequence (its answer is on the right).
    test = torch.Generator().manual_seed(20_000 + seed)
    ids = sample_pairs(perm, 512, pairs, test)
    rows, where = torch.arange(512), 2 * torch.randint(0, pairs, (512,), generator=test)
    inputs = ids.clone()
    inputs[rows, where] = MASK
    with torch.no_grad():
        logits = mlm_logits(model, inputs.to(device), left_to_right)
    predicted = logits[rows, where.to(device)].argmax(-1).cpu()
    return float((predicted == ids[rows, where]).float().mean())


def _bidirectional_seed(seed: int, preset: str, device: torch.device) -> dict[str, float]:
    steps = choose(preset, fast=150, live=200, full=300, gpu=1000)
    batch = choose(preset, fast=64, gpu=256)
    return {
        "bidirectional": _right_context_accuracy(seed, False, steps, batch, device),
        "left_to_right": _right_context_accuracy(seed, True, steps, batch, device),
    }


BIDIRECTIONAL = register(
    Lab(
        name="bidirectional_context",
        chapter="01_bert",
        question=(
            "Does seeing the right context matter? Masked-token accuracy when the answer is "
            "determined only by the token to its right."
        ),
        metric="accuracy on masked tokens whose answer is on the right (chance 1/32)",
        arms=("bidirectional", "left_to_right"),
        compare=("bidirectional", "left_to_right"),
        expected_sign="+",
        paper=(
            "BERT (Devlin et al. 2019) Table 5: a left-to-right model without NSP loses 1.2-10.9 "
            "points to the bidirectional MLM model on MNLI/QNLI/MRPC/SQuAD (SQuAD F1 88.5 -> 77.8)."
        ),
        why=(
            "Each pair is (perm[b], b) with b uniform: the first token is a function of its right "
            "neighbour and independent of its left context, so a left-to-right model is at chance "
            "on it by construction, while a bidirectional one can learn perm."
        ),
        run_seed=_bidirectional_seed,
    )
)
