"""Mechanism labs of chapter 01 (BERT).

bidirectional_context: BERT's "deep bidirectional" claim on a language built so that half the
tokens can be recovered only from their right neighbour. The two arms are the same model, the
same data and the same masked-LM loss; the left-to-right arm only adds a causal attention mask
(position i may attend to positions <= i), so the difference is exactly what the paper changed
relative to OpenAI GPT.

mask_8010_vs_always: BERT's 80/10/10 rule against always writing [MASK], measured where the
paper says the difference lies: the representations of *unmasked* input, read by a frozen linear
probe (the feature-based setting). Both arms call the library's `mask_tokens` with the same
selection; the configs differ only in what a selected token becomes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib.config import BertConfig, tiny_config
from course_lib.labels import IGNORE_INDEX
from course_lib.labs.core import choose, fit, lab, seed_everything
from course_lib.models.bert import BertForMaskedLM
from course_lib.objectives.masking import MaskingConfig, mask_tokens

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


@lab("01_bert", arms=("bidirectional", "left_to_right"), expected_sign="+")
def bidirectional_context(seed: int, preset: str, device: torch.device) -> dict[str, float]:
    """Does seeing the right context matter? Masked-token accuracy when the answer is determined
    only by the token to its right.

    Metric: accuracy on masked tokens whose answer is on the right (chance 1/32)

    Paper: BERT (Devlin et al. 2019) Table 5: a left-to-right model without NSP loses 1.2-10.9
    points to the bidirectional MLM model on MNLI/QNLI/MRPC/SQuAD (SQuAD F1 88.5 -> 77.8).

    Why: Each pair is (perm[b], b) with b uniform: the first token is a function of its right
    neighbour and independent of its left context, so a left-to-right model is at chance on it
    by construction, while a bidirectional one can learn perm."""
    steps = choose(preset, fast=150, live=200, full=300, gpu=1000)
    batch = choose(preset, fast=64, gpu=256)
    return {
        "bidirectional": _right_context_accuracy(seed, False, steps, batch, device),
        "left_to_right": _right_context_accuracy(seed, True, steps, batch, device),
    }


# --- mask_8010_vs_always -------------------------------------------------------------------------

N_TAGS = 16  # latent tags of the tag language; every content token can carry two of them
TAG_STEPS = 800  # always-[MASK] sits on the ln(32) plateau until ~400 steps; 800 learns both arms
ARM_MASKING = {  # the whole difference between the arms: what a selected token becomes
    "mask_80_10_10": MaskingConfig(mask_replace_prob=0.8, random_replace_prob=0.1),
    "always_mask": MaskingConfig(mask_replace_prob=1.0, random_replace_prob=0.0),
}


def make_tag_language(seed: int) -> tuple[Tensor, Tensor]:
    """A random tag language: (word_class, emission). word_class (N_CONTENT,) gives each content
    token one of N_TAGS classes (two tokens each); emission (N_TAGS, N_CONTENT) is uniform over
    the 2 * N_CONTENT / N_TAGS tokens a tag can emit, and every token is emitted by exactly two
    tags, so the token alone leaves its tag a coin flip."""
    generator = torch.Generator().manual_seed(30_000 + seed)
    emission = torch.zeros(N_TAGS, N_CONTENT)
    for j, token in enumerate(torch.randperm(N_CONTENT, generator=generator).tolist()):
        emission[j % N_TAGS, token] = emission[(j + 1) % N_TAGS, token] = 1.0
    emission /= emission.sum(1, keepdim=True)
    word_class = torch.randperm(N_CONTENT, generator=generator) % N_TAGS
    return word_class, emission


def sample_tagged(
    word_class: Tensor, emission: Tensor, batch: int, length: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """(ids, tags), both (batch, length). Even positions hold free tokens (uniform); the token at
    each odd position i carries the latent tag class[x(i-1)], the class of its LEFT neighbour,
    and is drawn from that tag's emission (4 tokens). tags is that tag at odd positions and
    IGNORE_INDEX elsewhere. A masked odd token is 1 of 4 given its neighbour and 1 of 32 without."""
    ids = torch.randint(0, N_CONTENT, (batch, length), generator=generator)
    tag = word_class[ids[:, 0:-1:2]]  # (B, T // 2): the tags of the odd positions
    ids[:, 1::2] = torch.multinomial(emission[tag.flatten()], 1, generator=generator).view_as(tag)
    tags = torch.full_like(ids, IGNORE_INDEX)
    tags[:, 1::2] = tag
    return ids + N_SPECIAL, tags


def linear_probe(
    train_x: Tensor, train_y: Tensor, test_x: Tensor, test_y: Tensor, classes: int
) -> tuple[float, float]:
    """(accuracy, cross-entropy in nats) on (test_x, test_y) of a softmax-regression probe fitted
    by L-BFGS on frozen features (train_x, train_y), standardised with the training statistics."""
    mean, std = train_x.mean(0), train_x.std(0) + 1e-5
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std
    probe = torch.nn.Linear(train_x.shape[1], classes)
    optimizer = torch.optim.LBFGS(probe.parameters(), max_iter=100, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(probe(train_x), train_y) + 1e-3 * probe.weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    with torch.no_grad():
        logits = probe(test_x)
        accuracy = float((logits.argmax(-1) == test_y).float().mean())
        return accuracy, float(F.cross_entropy(logits, test_y))


def linear_probe_accuracy(
    train_x: Tensor, train_y: Tensor, test_x: Tensor, test_y: Tensor, classes: int
) -> float:
    """Held-out accuracy of `linear_probe`."""
    return linear_probe(train_x, train_y, test_x, test_y, classes)[0]


def pretrain_tagger(
    seed: int, arm: str, steps: int, batch: int, device: torch.device, length: int = 16
) -> BertForMaskedLM:
    """Pretrain one arm with masked-LM on the seed's tag language (1 layer, H = 64)."""
    word_class, emission = make_tag_language(seed)
    generator = seed_everything(seed)  # same data, selections and initial weights in both arms
    config = tiny_config(
        BertConfig, N_SPECIAL + N_CONTENT, layers=1, max_positions=length, initializer_range=0.1
    )
    model = BertForMaskedLM(config).to(device)
    special = torch.zeros(batch, length, dtype=torch.bool)  # no [CLS]/[SEP]: every token counts
    content = torch.arange(N_SPECIAL, N_SPECIAL + N_CONTENT)  # random replacements come from here

    def step_loss(_step: int) -> Tensor:
        ids, _ = sample_tagged(word_class, emission, batch, length, generator)
        inputs, labels = mask_tokens(
            ids,
            special,
            MASK,
            N_SPECIAL + N_CONTENT,
            ARM_MASKING[arm],
            generator,
            non_special_ids=content,
        )
        return model(inputs.to(device), labels=labels.to(device)).loss

    fit(model, step_loss, steps, lr=5e-3)
    return model


def clean_probe(model: BertForMaskedLM, seed: int, length: int = 16) -> dict[str, float]:
    """Feature-based use: the frozen encoder reads CLEAN text (no [MASK]); a linear probe fitted
    on half of 512 sequences reads the tags from last-layer states of the other half. Also the
    masked-LM accuracy at one masked odd position per sequence (the task's ceiling is 1/4)."""
    word_class, emission = make_tag_language(seed)
    test = torch.Generator().manual_seed(40_000 + seed)
    ids, tags = sample_tagged(word_class, emission, 512, length, test)
    device = next(model.parameters()).device
    rows, where = torch.arange(512), 1 + 2 * torch.randint(0, length // 2, (512,), generator=test)
    masked = ids.clone()
    masked[rows, where] = MASK
    with torch.no_grad():
        states = model.backbone(ids.to(device)).last_hidden_state.cpu()  # (512, T, H)
        logits = model(masked.to(device)).mlm_logits[rows, where.to(device)].cpu()  # (512, V)
    tagged = tags >= 0
    x, y = states[tagged], tags[tagged]  # (n, H), (n,)
    half = len(y) // 2
    accuracy, nats = linear_probe(x[:half], y[:half], x[half:], y[half:], N_TAGS)
    mlm = float((logits.argmax(-1) == ids[rows, where]).float().mean())
    return {"probe_nats": nats, "probe_accuracy": accuracy, "mlm_accuracy": mlm}


@lab(
    "01_bert", arms=tuple(ARM_MASKING), expected_sign="-", compare=("mask_80_10_10", "always_mask")
)
def mask_8010_vs_always(seed: int, preset: str, device: torch.device) -> dict[str, float]:
    """Does always writing [MASK] hurt the representations of unmasked input? Frozen last-layer
    states of clean text, read by a linear probe for a latent tag.

    Metric: held-out cross-entropy (nats) of a linear probe for the latent tag on clean input
    (from the token alone: ln 2 = 0.69)

    Paper: BERT (Devlin et al. 2019) Appendix C.2, Table 8: 100% [MASK] instead of 80/10/10
    costs 0.5 dev F1 on fine-tuned NER (95.4 -> 94.9) and 0.9 on feature-based NER (94.9 ->
    94.0), while MNLI is unchanged (84.2 vs 84.3).

    Why: A token's tag is the class of its left neighbour, and the token alone leaves two tags
    possible. Masked-LM needs the tag (a masked token is 1 of 4 given it), so both arms learn to
    fetch the neighbour; but with always-[MASK] only outputs at [MASK] positions are ever
    trained, while with 80/10/10 a real (possibly random) token can be a target too, so the
    output at every position is trained to carry the tag: what a frozen encoder shows a probe on
    clean text. (A first design, tag = (class(left) + class(right)) mod 4, failed: neither arm
    learned it in 600 steps, both probes 0.5.)"""
    steps = choose(preset, fast=100, live=TAG_STEPS, gpu=2000)
    batch = choose(preset, fast=64, gpu=256)
    return {
        arm: clean_probe(pretrain_tagger(seed, arm, steps, batch, device), seed)["probe_nats"]
        for arm in ARM_MASKING
    }
