"""Mechanism labs of chapter 03 (ALBERT), part B: cross-layer parameter sharing.

sharing_hurts_induction: a task that needs two DIFFERENT layers. A random segment appears twice
at random places; one token of the second copy is masked. To fill it in, one layer must move each
token's left neighbour into its position (a previous-token head), and the next must find the
earlier position with the same left neighbour and copy its token (an induction head). Not-shared
layers can specialise; all-shared ones must do both jobs with one set of weights.

sharing_fine_for_iteration: a task that repeats ONE operation. A permutation f is laid out by
position (position x holds f(x)); the query asks for f^(2^L - 1)(s). Pointer doubling (every
position replaces its pointer p by the pointer stored at position p) does it in L identical
steps, so all-shared layers lose nothing to not-shared ones, and L applications of the shared
layer beat one application of the same weights (the same parameter count).

Every arm is the course's AlbertForMaskedLM from `tiny_config(AlbertConfig, ...)`; arms differ
only in `sharing` (or, for "one_layer", in num_hidden_layers with the same weights' count).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib.config import AlbertConfig
from course_lib.counting import count_parameters
from course_lib.labs.core import Lab, choose, fit, register, seed_everything, tiny_config
from course_lib.models.albert import AlbertForMaskedLM

# Vocabulary: ids 0..3 are special, content tokens are 4, 5, ...
PAD, MASK = 0, 1
LR = 5e-3
HIDDEN = 32
N_SPECIAL = 4


# ---------------------------------------------------------------------------------------------
# Lab (a): induction over a repeated random segment
# ---------------------------------------------------------------------------------------------

INDUCTION_LENGTH = 12  # tokens per sequence
INDUCTION_VOCAB = 16  # content tokens (every sequence uses distinct ones outside the copy)
SEGMENT = (2, 4)  # the copied segment's length n, drawn per sequence from this range


def sample_induction(
    batch: int,
    generator: torch.Generator,
    length: int = INDUCTION_LENGTH,
    vocab: int = INDUCTION_VOCAB,
    segment: tuple[int, int] = SEGMENT,
) -> tuple[Tensor, Tensor, Tensor]:
    """A batch of the induction task -> (ids (B, T), targets (B, T) bool, offset (B,)).

    Each row: distinct random tokens, except a segment of random length n that appears at a
    random start a and again at b = a + offset, the offset uniform over what fits. `targets`
    marks the positions to mask and predict: every other token of the second copy, starting
    with its second (b + 1, b + 3, ... < b + n), so each target's left neighbour is an
    unmasked token of the copy. A target at q has its answer at q - offset."""
    ids = torch.empty(batch, length, dtype=torch.long)
    targets = torch.zeros(batch, length, dtype=torch.bool)
    offset = torch.empty(batch, dtype=torch.long)
    for row in range(batch):
        n = int(torch.randint(segment[0], segment[1] + 1, (1,), generator=generator))
        d = int(torch.randint(n, length - n + 1, (1,), generator=generator))  # b - a
        a = int(torch.randint(0, length - n - d + 1, (1,), generator=generator))
        b = a + d
        tokens = torch.randperm(vocab, generator=generator)[: length - n] + N_SPECIAL
        copied = torch.zeros(length, dtype=torch.bool)
        copied[a : a + n] = True
        copied[b : b + n] = True
        ids[row, a : a + n] = tokens[:n]
        ids[row, b : b + n] = tokens[:n]
        ids[row, ~copied] = tokens[n:]
        targets[row, b + 1 : b + n : 2] = True
        offset[row] = d
    return ids, targets, offset


def fixed_offset_accuracy(ids: Tensor, targets: Tensor, distance: int) -> float:
    """Accuracy over the targets of the one-head positional rule "the answer is the token
    `distance` to the left" (what one layer could copy if the repeat sat at a fixed offset)."""
    rows, cols = targets.nonzero(as_tuple=True)
    source = cols - distance
    guess = torch.where(source >= 0, ids[rows, source.clamp(min=0)], -1)
    return float((guess == ids[rows, cols]).float().mean())


def induction_rule(ids: Tensor, targets: Tensor) -> Tensor:
    """The two-step rule, written out, for every target: find the earlier position whose left
    neighbour equals the target's left neighbour, and read the token there. (n_targets,) ids."""
    rows, cols = targets.nonzero(as_tuple=True)
    left = ids[rows, cols - 1]  # the target's left neighbour
    previous = torch.cat([torch.full_like(ids[:, :1], -1), ids[:, :-1]], dim=1)  # (B, T)
    positions = torch.arange(ids.shape[1])
    match = (previous[rows] == left[:, None]) & (positions[None] < cols[:, None] - 1)
    return ids[rows, match.float().argmax(dim=1)]  # the (only) earlier match


def masked_logits(model: AlbertForMaskedLM, inputs: Tensor, targets: Tensor) -> Tensor:
    """(n_targets, V) masked-LM logits at the target positions (inputs already masked there)."""
    hidden = model.backbone(inputs).last_hidden_state  # (B, T, H)
    return model.mlm_head(hidden[targets])  # (n_targets, V)


def query_logits(model: AlbertForMaskedLM, inputs: Tensor, query: Tensor) -> Tensor:
    """(B, V) masked-LM logits at one position per row."""
    hidden = model.backbone(inputs).last_hidden_state  # (B, T, H)
    picked = hidden[torch.arange(len(query), device=hidden.device), query]  # (B, H)
    return model.mlm_head(picked)  # (B, V)


def induction_config(sharing: str, layers: int = 2, hidden: int | None = None) -> AlbertConfig:
    """The lab's ALBERT: H = E = 32 (no factorisation), 4 heads; only `sharing` differs."""
    return tiny_config(
        AlbertConfig,
        N_SPECIAL + INDUCTION_VOCAB,
        hidden_size=hidden or HIDDEN,
        layers=layers,
        max_positions=INDUCTION_LENGTH,
        embedding_size=hidden or HIDDEN,
        sharing=sharing,
        initializer_range=0.1,
        pre_layer_norm=True,
    )


def _induction_accuracy(
    seed: int, sharing: str, steps: int, batch: int, device: torch.device, layers: int = 2
) -> float:
    """Train one arm; accuracy on the masked second-copy tokens of 512 held-out sequences."""
    generator = seed_everything(seed)
    model = AlbertForMaskedLM(induction_config(sharing, layers)).to(device)

    def batch_loss(ids: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        inputs = ids.masked_fill(targets, MASK).to(device)
        logits = masked_logits(model, inputs, targets.to(device))  # (n_targets, V)
        return logits, ids[targets].to(device)

    def step_loss(_step: int) -> Tensor:
        ids, targets, _ = sample_induction(batch, generator)
        return F.cross_entropy(*batch_loss(ids, targets))

    fit(model, step_loss, steps, lr=LR)
    ids, targets, _ = sample_induction(512, torch.Generator().manual_seed(20_000 + seed))
    with torch.no_grad():
        logits, answer = batch_loss(ids, targets)
    return float((logits.argmax(-1) == answer).float().mean())


def _induction_seed(seed: int, preset: str, device: torch.device) -> dict[str, float]:
    steps = choose(preset, fast=60, live=600, full=1200, gpu=4000)
    batch = choose(preset, fast=64, gpu=256)
    return {
        "not_shared": _induction_accuracy(seed, "none", steps, batch, device),
        "all_shared": _induction_accuracy(seed, "all", steps, batch, device),
    }


# ---------------------------------------------------------------------------------------------
# Lab (b): pointer chasing by repeated doubling
# ---------------------------------------------------------------------------------------------

NODES = 8  # the permutation's size: position x holds f(x)


def hops_for(layers: int) -> int:
    """How far L applications of "p <- the pointer stored at position p" reach: every stored
    pointer doubles its reach per layer, from f to f^(2^L)."""
    return 2**layers


def sample_pointers(
    batch: int, generator: torch.Generator, hops: int, nodes: int = NODES
) -> tuple[Tensor, Tensor]:
    """(ids (B, nodes), answers (B, nodes)): a random permutation f per row laid out by position
    (position x holds token f(x)); the answer at position x is f^hops(x). Node x is token id
    N_SPECIAL + x."""
    perms = torch.stack([torch.randperm(nodes, generator=generator) for _ in range(batch)])
    node = torch.arange(nodes).expand(batch, nodes)
    for _ in range(hops):
        node = perms.gather(1, node)  # follow one more pointer from every position
    return perms + N_SPECIAL, node + N_SPECIAL


def pointer_config(sharing: str, layers: int, hidden: int | None = None) -> AlbertConfig:
    """The lab's ALBERT; one_layer is `pointer_config("all", 1)`: the same weights as an
    all-shared L-layer model, applied once."""
    return tiny_config(
        AlbertConfig,
        N_SPECIAL + NODES,
        hidden_size=hidden or HIDDEN,
        layers=layers,
        max_positions=NODES,
        embedding_size=hidden or HIDDEN,
        sharing=sharing,
        initializer_range=0.1,
        pre_layer_norm=True,
    )


def _pointer_accuracy(
    seed: int, sharing: str, layers: int, hops: int, steps: int, batch: int, device: torch.device
) -> float:
    """Train one arm to output f^hops(x) at every position x; held-out accuracy (512 rows)."""
    generator = seed_everything(seed)
    model = AlbertForMaskedLM(pointer_config(sharing, layers)).to(device)

    def logits_of(ids: Tensor) -> Tensor:
        return model.mlm_head(model.backbone(ids.to(device)).last_hidden_state)  # (B, T, V)

    def step_loss(_step: int) -> Tensor:
        ids, answers = sample_pointers(batch, generator, hops)
        return F.cross_entropy(logits_of(ids).flatten(0, 1), answers.to(device).flatten())

    fit(model, step_loss, steps, lr=LR)
    ids, answers = sample_pointers(512, torch.Generator().manual_seed(20_000 + seed), hops)
    with torch.no_grad():
        predicted = logits_of(ids).argmax(-1).cpu()
    return float((predicted == answers).float().mean())


POINTER_LAYERS = 2


def _pointer_seed(seed: int, preset: str, device: torch.device) -> dict[str, float]:
    steps = choose(preset, fast=60, live=400, full=800, gpu=3000)
    batch = choose(preset, fast=64, gpu=256)
    hops = hops_for(POINTER_LAYERS)
    return {
        "all_shared": _pointer_accuracy(seed, "all", POINTER_LAYERS, hops, steps, batch, device),
        "not_shared": _pointer_accuracy(seed, "none", POINTER_LAYERS, hops, steps, batch, device),
        "one_layer": _pointer_accuracy(seed, "all", 1, hops, steps, batch, device),
    }


def parameter_counts() -> dict[str, dict[str, int]]:
    """Parameters per arm of both labs (course_lib.counting), for the notebook's table."""
    return {
        "sharing_hurts_induction": {
            "not_shared": count_parameters(induction_config("none"), "AlbertForMaskedLM")["total"],
            "all_shared": count_parameters(induction_config("all"), "AlbertForMaskedLM")["total"],
        },
        "sharing_fine_for_iteration": {
            arm: count_parameters(pointer_config(sharing, layers), "AlbertForMaskedLM")["total"]
            for arm, sharing, layers in (
                ("all_shared", "all", POINTER_LAYERS),
                ("not_shared", "none", POINTER_LAYERS),
                ("one_layer", "all", 1),
            )
        },
    }


INDUCTION = register(
    Lab(
        name="sharing_hurts_induction",
        chapter="03_albert",
        question=(
            "Does sharing one layer's weights across depth cost a task that needs two different "
            "layers? Masked-token accuracy in the second copy of a repeated random segment."
        ),
        metric="accuracy on masked tokens of the repeated segment (fixed-offset rules < 0.2)",
        arms=("not_shared", "all_shared"),
        compare=("not_shared", "all_shared"),
        expected_sign="+",
        paper=(
            "ALBERT (Lan et al. 2020) Table 4: ALBERT-base E=768 averages 82.3 not-shared "
            "(108M parameters) against 79.8 all-shared (31M); E=128: 81.6 (89M) against "
            "80.1 (12M)."
        ),
        why=(
            "The repeat sits at a random offset, so no positional head can copy it; the answer "
            "is the token after the earlier occurrence of the masked token's left neighbour, "
            "which needs a previous-token layer and then a different, induction layer. "
            "Not-shared layers can specialise; all-shared ones apply the same weights twice."
        ),
        run_seed=_induction_seed,
    )
)

ITERATION = register(
    Lab(
        name="sharing_fine_for_iteration",
        chapter="03_albert",
        question=(
            "Does sharing cost a task that repeats one operation? Accuracy of f^4(x) at every "
            "position of a random permutation f laid out by position, where two applications "
            "of the same pointer-doubling step are enough."
        ),
        metric="accuracy of f^4(x) at every position (chance 1/8)",
        arms=("all_shared", "not_shared", "one_layer"),
        compare=("all_shared", "one_layer"),
        expected_sign="+",
        paper=(
            "ALBERT (Lan et al. 2020) §3.1, Table 4: all-shared loses 2.5 points (E=768) and "
            "1.5 points (E=128) of average downstream score to not-shared at a quarter to a "
            "seventh of the parameters; Universal Transformers (Dehghani et al. 2019) apply "
            "one layer repeatedly by design."
        ),
        why=(
            "Replacing every position's pointer p by the pointer stored at position p turns f "
            "into f^2, then f^4: the same step in both layers, so all-shared layers can do "
            "what not-shared ones do, while one application of the same weights (the same "
            "parameter count) reaches only f^2."
        ),
        run_seed=_pointer_seed,
    )
)
