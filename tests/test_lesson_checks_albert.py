"""The checks of ALBERT's lesson build cells (chapter 03, notebooks 01-03 and 06): each says
"Not written yet" on the stub and hands back the library's version, names typical wrong answers
(including answers right only at typical sizes), and accepts the master notebook's answer."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lesson_masters
import pytest
import torch
from torch import nn

from course_lib.data.pairs import concat_segments
from course_lib.exercises import lessons_albert as checks
from course_lib.modules.sharing import SUBLAYERS

ROOT = Path(__file__).resolve().parents[1]
MASTERS = ROOT / "chapters" / "03_albert" / "instructor"


def master_answer(notebook: str, name: str, **namespace: Any) -> Callable:
    """`name` as the master's build cell defines it, exec'd with what the lesson has imported."""
    return lesson_masters.master_answer(
        "03_albert",
        notebook,
        name,
        SUBLAYERS=SUBLAYERS,
        concat_segments=concat_segments,
        **namespace,
    )


def stub(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError()


def verdict(check: checks.BuildCheck, candidate: Callable, capsys) -> tuple[Any, str]:
    returned = check(candidate)
    return returned, capsys.readouterr().out


def assert_rejected(check: checks.BuildCheck, candidate: Callable, message: str, capsys) -> None:
    returned, out = verdict(check, candidate, capsys)
    assert returned is check.fallback
    assert out.startswith("✗ "), out
    assert re.search(message, out), out
    assert "uses the library's" in out


# (check, notebook, name)
MASTER_ANSWERS = [
    (
        checks.check_factorized_count,
        "01_factorized_embeddings.ipynb",
        "factorized_embedding_parameters",
    ),
    (checks.check_factorized_embedding, "01_factorized_embeddings.ipynb", "MyFactorizedEmbedding"),
    (checks.check_shared_sublayers, "02_cross_layer_sharing.ipynb", "my_shared_sublayers"),
    (checks.check_shared_encoder, "02_cross_layer_sharing.ipynb", "my_shared_encoder"),
    (checks.check_sop_pair, "03_sop_vs_nsp.ipynb", "my_sop_pair"),
    (checks.check_overlap, "03_sop_vs_nsp.ipynb", "my_overlap"),
    (checks.check_conditional_entropy, "06_labs_embedding_and_sop.ipynb", "my_conditional_entropy"),
    (checks.check_overlap_classifier, "06_labs_embedding_and_sop.ipynb", "my_overlap_classifier"),
    (checks.check_order_rule, "06_labs_embedding_and_sop.ipynb", "my_order_rule"),
    (checks.check_sample_hops, "07_labs_sharing.ipynb", "my_sample_hops"),
    (checks.check_sample_pointers, "07_labs_sharing.ipynb", "my_sample_pointers"),
]
IDS = [m[2] for m in MASTER_ANSWERS]


@pytest.mark.parametrize("check, notebook, name", MASTER_ANSWERS, ids=IDS)
def test_the_masters_answer_is_correct(check, notebook, name, capsys):
    from course_lib.labs import albert, albert_sharing

    lab = albert_sharing if notebook.startswith("07") else albert
    answer = master_answer(notebook, name, lab=lab)
    returned, out = verdict(check, answer, capsys)
    assert returned is answer, out
    assert out.startswith("✓ Correct!"), out


@pytest.mark.parametrize("check", [m[0] for m in MASTER_ANSWERS], ids=IDS)
def test_a_stub_is_not_written_yet_and_the_library_stands_in(check, capsys):
    returned, out = verdict(check, stub, capsys)
    assert returned is check.fallback
    assert out == check.stub_output("stub")
    assert out.startswith("· Not written yet: `stub` — ") and check.todo in out


# ----- the fallbacks and references equal the library ------------------------------------------


def test_the_fallbacks_pass_their_own_checks(capsys):
    """What stands in for a learner's missing answer is right by the same probe."""
    for check, _, _ in MASTER_ANSWERS:
        returned, out = verdict(check, check.fallback, capsys)
        assert returned is check.fallback and out.startswith("✓ Correct!"), out


def test_sop_pair_is_make_sop_examples_pair_builder():
    """sop_pair, put in make_sop_examples' loop, gives make_sop_examples' examples one for one."""
    import random

    from course_lib.data.pairs import make_sop_examples, tokenize_documents, walk_chunks
    from course_lib.tokenization import train_tokenizer

    documents = [
        [f"sentence {d} {s} " + "word " * ((d * 7 + s * 3) % 11 + 1) for s in range(2 + d % 5)]
        for d in range(12)
    ]
    tok = train_tokenizer("albert", (" ".join(d) for d in documents), vocab_size=60)
    for seed in (0, 1, 2):
        rng = random.Random(seed)
        budget = 16 - tok.num_special_tokens_to_add(pair=True)
        ours = []

        def emit(chunk, goal, rng=rng, ours=ours, budget=budget):
            a, b, label = checks.sop_pair(chunk, rng, budget)
            ids, types = tok.build_inputs_with_special_tokens(a[0], b[0])
            ours.append(
                {"input_ids": ids, "token_type_ids": types,
                 "word_ids": tok.build_word_ids(a[1], b[1]), "sentence_order_label": label}
            )  # fmt: skip
            return 0

        for doc in tokenize_documents(documents, tok)[0]:
            if len(doc) >= 2:
                walk_chunks(doc, rng, budget, 0.1, emit)
        rng.shuffle(ours)
        assert ours == list(make_sop_examples(documents, tok, 16, seed=seed))


# ----- typical wrong answers, each named --------------------------------------------------------


def _count(tables_h=False, always_project=False, bias=True, fixed_t=False):
    def count(V, E, H, P=512, T=2):  # noqa: N803
        t = 2 if fixed_t else T
        tables = V * E + (P + t) * (H if tables_h else E)
        return tables + (E * H + (H if bias else 0) if (E != H or always_project) else 0)

    return count


@pytest.mark.parametrize(
    "wrong, message",
    [
        # right at every E < H (ALBERT-base's 128 < 768): wrong only at E = H
        (_count(always_project=True), "at E = H = 64 there is no projection"),
        (_count(tables_h=True), "position and segment tables are E-wide too"),
        (_count(bias=False), "projection's bias"),
        # right with two segment types only
        (_count(fixed_t=True), "use the T you are given"),
        (lambda V, E, H, P=512, T=2: (V + P + T) * H, "BERT's count"),  # noqa: N803
        (lambda V, E, H, P=512, T=2: float((V + P + T) * E), "return an int"),  # noqa: N803
    ],
)
def test_factorized_count_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_factorized_count, wrong, message, capsys)


def _module(norm_in_h=False, norm=True, segment_default=True, positions_by_row=False):
    class Embedding(nn.Module):
        def __init__(self, V, P, T, E, H, eps=1e-12):  # noqa: N803
            super().__init__()
            self.word, self.position = nn.Embedding(V, E), nn.Embedding(P, E)
            self.segment = nn.Embedding(T, E)
            self.norm = nn.LayerNorm(H if norm_in_h else E, eps=eps)
            self.projection = nn.Linear(E, H)

        def forward(self, input_ids, token_type_ids=None):
            n = input_ids.shape[0 if positions_by_row else 1]
            x = self.word(input_ids) + self.position(torch.arange(n))[: input_ids.shape[1]]
            if token_type_ids is None and segment_default:
                token_type_ids = torch.zeros_like(input_ids)
            if token_type_ids is not None:
                x = x + self.segment(token_type_ids)
            if norm_in_h:
                return self.norm(self.projection(x))
            return self.projection(self.norm(x) if norm else x)

    return Embedding


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_module(norm_in_h=True), r"`norm.weight` is of shape \(24,\), expected \(8,\)"),
        (_module(norm=False), "the LayerNorm is not applied"),
        # right whenever token_type_ids are passed (as in the lesson's own comparison)
        (_module(segment_default=False), "the segment embedding is missing"),
        # right while the batch is at least as long as the sequence
        (_module(positions_by_row=True), r"raised|position \(0 \.\. T-1 in every row\)"),
    ],
)
def test_factorized_embedding_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_factorized_embedding, wrong, message, capsys)


def _applied_once(layer, x, num_layers, keep=None):
    return layer(x, keep)[0]


def _without_mask(layer, x, num_layers, keep=None):
    for _ in range(num_layers):
        x, _ = layer(x)
    return x


def _reads_original(layer, x, num_layers, keep=None):
    out = x
    for _ in range(num_layers):
        out, _ = layer(x, keep)
    return out


def _returns_tuple(layer, x, num_layers, keep=None):
    out = (x, None)
    for _ in range(num_layers):
        out = layer(out[0], keep)
    return out


@pytest.mark.parametrize(
    "wrong, message",
    [
        # right with one layer
        (_applied_once, "applied 1 times"),
        # right without padding
        (_without_mask, "keep-mask was not passed"),
        (_reads_original, "read the ORIGINAL x"),
        (_returns_tuple, "you returned a tuple"),
    ],
)
def test_shared_encoder_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_shared_encoder, wrong, message, capsys)


def _by_value(layers):
    return {name: checks._grouped_by_value(layers, name) for name in SUBLAYERS}


def _consecutive(layers):
    table = {}
    for name in SUBLAYERS:
        groups = []
        for i, layer in enumerate(layers):
            if groups and getattr(layers[groups[-1][-1]], name) is getattr(layer, name):
                groups[-1].append(i)
            else:
                groups.append([i])
        table[name] = groups
    return table


def _whole_layers(layers):
    groups = {}
    for i, layer in enumerate(layers):
        groups.setdefault(id(layer), []).append(i)
    return {name: list(groups.values()) for name in SUBLAYERS}


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_by_value, "copies with equal values are NOT shared"),
        # right for ALBERT's consecutive groups
        (_consecutive, "need not sit in consecutive layers"),
        # right for all-shared and not-shared stacks
        (_whole_layers, "look at each sublayer object"),
    ],
)
def test_shared_sublayers_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_shared_sublayers, wrong, message, capsys)


def _sop(ends="junction", tie_cuts_a=False, swap_first=False, in_place=False, flip=False):
    def pair(chunk, rng, budget):
        if swap_first:
            swapped = rng.random() < 0.5
            split = rng.randint(1, len(chunk) - 1)
        else:
            split = rng.randint(1, len(chunk) - 1)
            swapped = rng.random() < 0.5
        if in_place and split == 1:
            a = chunk[0]  # the learner's own sentence list, not a copy
        else:
            a = concat_segments(chunk[:split])
        b = concat_segments(chunk[split:])
        if swapped:
            a, b = b, a
        while len(a[0]) + len(b[0]) > budget:
            cut_a = len(a[0]) >= len(b[0]) if tie_cuts_a else len(a[0]) > len(b[0])
            if cut_a:
                index = 0 if ends == "junction" else -1
                del a[0][index], a[1][index]
            else:
                index = -1 if ends == "junction" else 0
                del b[0][index], b[1][index]
        return a, b, 1 - int(swapped) if flip else int(swapped)

    return pair


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_sop(ends="outer"), "the right lengths, the wrong ends"),
        # right except when the two segments have the same length
        (_sop(tie_cuts_a=True), r"from the LONGER segment \(B on a tie\)"),
        (_sop(swap_first=True), "another order or number"),
        # right whenever the first segment is more than one sentence
        (_sop(in_place=True), "changed the chunk's sentences in place"),
        (_sop(flip=True), "labelled"),
    ],
)
def test_sop_pair_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_sop_pair, wrong, message, capsys)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda t: float((t.exp() * t).sum(1).mean()), "entropy is MINUS"),
        # right on the lab's 512 x 512 table only
        (lambda t: float(-(t.exp() * t).sum(1).sum()) / 512, "divided by 512"),
        (lambda t: float(-(t.exp() * t).sum(0).mean()), "each ROW is a distribution"),
        (lambda t: float(-(t.exp() * t).sum(1).mean()) / math.log(2), "in bits"),
        (lambda t: float(-(t.exp_() * t.log()).sum(1).mean()), "in place"),
    ],
)
def test_conditional_entropy_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_conditional_entropy, wrong, message, capsys)


def _overlap(specials=False, lists=False, by_a=False):
    def overlap(example, special_ids):
        ids, types = example["input_ids"], example["token_type_ids"]
        keep = (lambda i: True) if specials else (lambda i: i not in special_ids)
        a = [i for i, t in zip(ids, types) if t == 0 and keep(i)]
        b = [i for i, t in zip(ids, types) if t == 1 and keep(i)]
        if lists:  # multisets: a repeated token counts every time
            shared = sum(min(a.count(i), b.count(i)) for i in set(a))
            return shared / max(1, len(a) + len(b) - shared)
        sa, sb = set(a), set(b)
        return len(sa & sb) / max(1, len(sa) if by_a else len(sa | sb))

    return overlap


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_overlap(specials=True), "leave the special tokens out"),
        # right whenever no token repeats within a segment
        (_overlap(lists=True), "compare the SETS of tokens"),
        (_overlap(by_a=True), "not of A's"),
    ],
)
def test_overlap_mistakes(wrong, message, capsys):
    assert_rejected(checks.check_overlap, wrong, message, capsys)


# ----- 06's baselines and 07's samplers ------------------------------------------------------------

from course_lib.labs import albert as sop_lab  # noqa: E402
from course_lib.labs import albert_sharing as sharing_lab  # noqa: E402


def _overlap_sets(input_ids):
    a, b = sop_lab.segment_words(input_ids)
    shares = torch.tensor([len(set(x.tolist()) & set(y.tolist())) > 0 for x, y in zip(a, b)])
    return (~shares).long()


def _overlap_by_position(input_ids):  # compares position by position, not the two sets
    a, b = sop_lab.segment_words(input_ids)
    return (~(a == b).any(dim=1)).long()


def _overlap_with_counters(input_ids):  # the counters counted as words
    a = input_ids[:, 1 : 2 + sop_lab.SEGMENT_WORDS]
    b = input_ids[:, sop_lab.START_B : sop_lab.START_B + 1 + sop_lab.SEGMENT_WORDS]
    shares = torch.tensor([len(set(x.tolist()) & set(y.tolist())) > 0 for x, y in zip(a, b)])
    return (~shares).long()


def _order_le(input_ids):
    a, b = sop_lab.segment_counters(input_ids)
    return torch.tensor([int(y <= x) for x, y in zip(a.tolist(), b.tolist())])


def _order_lt(input_ids):  # a tie counted as 'in order'
    a, b = sop_lab.segment_counters(input_ids)
    return (b < a).long()


def _order_squeezed(input_ids):
    a, b = sop_lab.segment_counters(input_ids)
    return (b <= a).long().squeeze()


@pytest.mark.parametrize(
    "check, answer, wrong",
    [
        (
            checks.check_overlap_classifier,
            _overlap_sets,
            [
                (lambda ids: 1 - _overlap_sets(ids), "every label is flipped"),
                (_overlap_by_position, "different positions.*SETS"),
                (_overlap_with_counters, "counters are not"),
            ],
        ),
        (
            checks.check_order_rule,
            _order_le,
            [
                (lambda ids: 1 - _order_le(ids), "every label is flipped"),
                (_order_lt, r"equal counters.*<="),
                (_order_squeezed, r"batch of one.*squeeze"),
            ],
        ),
    ],
    ids=["overlap_classifier", "order_rule"],
)
def test_sop_baselines_name_their_mistakes(check, answer, wrong, capsys):
    returned, out = verdict(check, answer, capsys)
    assert returned is answer and out.startswith("✓ Correct!"), out
    for candidate, message in wrong:
        assert_rejected(check, candidate, message, capsys)
    returned, out = verdict(check, stub, capsys)
    assert returned is check.fallback and out == check.stub_output("stub")


def _hops(batch, generator, relations=sharing_lab.HOP_RELATIONS, nodes=sharing_lab.HOP_NODES):
    f = torch.stack([torch.randperm(nodes, generator=generator) for _ in range(batch)])
    node = f
    for s in relations:
        node = f.gather(1, torch.tensor(s)[node])
    return f + sharing_lab.N_SPECIAL, node + sharing_lab.N_SPECIAL


def _hops_swapped(
    batch, generator, relations=sharing_lab.HOP_RELATIONS, nodes=sharing_lab.HOP_NODES
):
    f = torch.stack([torch.randperm(nodes, generator=generator) for _ in range(batch)])
    node = f
    for s in relations:  # s(f(v)) instead of f(s(v))
        node = torch.tensor(s)[f.gather(1, node)]
    return f + sharing_lab.N_SPECIAL, node + sharing_lab.N_SPECIAL


def _hops_one_perm(
    batch, generator, relations=sharing_lab.HOP_RELATIONS, nodes=sharing_lab.HOP_NODES
):
    f = torch.randperm(nodes, generator=generator).expand(batch, nodes)  # one f for every row
    node = f
    for s in relations:
        node = f.gather(1, torch.tensor(s)[node])
    return f + sharing_lab.N_SPECIAL, node + sharing_lab.N_SPECIAL


def _hops_no_offset(
    batch, generator, relations=sharing_lab.HOP_RELATIONS, nodes=sharing_lab.HOP_NODES
):
    ids, answers = _hops(batch, generator, relations, nodes)
    return ids - sharing_lab.N_SPECIAL, answers - sharing_lab.N_SPECIAL


def _pointers(batch, generator, hops, nodes=sharing_lab.NODES):
    f = torch.stack([torch.randperm(nodes, generator=generator) for _ in range(batch)])
    node = torch.arange(nodes).expand(batch, nodes)
    for _ in range(hops):
        node = f.gather(1, node)
    return f + sharing_lab.N_SPECIAL, node + sharing_lab.N_SPECIAL


def _pointers_from_f(batch, generator, hops, nodes=sharing_lab.NODES):  # right only for hops >= 1
    f = torch.stack([torch.randperm(nodes, generator=generator) for _ in range(batch)])
    node = f
    for _ in range(hops - 1):
        node = f.gather(1, node)
    return f + sharing_lab.N_SPECIAL, node + sharing_lab.N_SPECIAL


def _pointers_lab_nodes(batch, generator, hops, nodes=sharing_lab.NODES):  # ignores `nodes`
    return _pointers(batch, generator, hops, sharing_lab.NODES)


@pytest.mark.parametrize(
    "check, answer, wrong",
    [
        (
            checks.check_sample_hops,
            _hops,
            [
                (_hops_swapped, r"s first, then f"),
                (_hops_one_perm, "same permutation"),
                (_hops_no_offset, "N_SPECIAL"),
            ],
        ),
        (
            checks.check_sample_pointers,
            _pointers,
            [
                (_pointers_from_f, r"zero steps.*start from x itself"),
                (_pointers_lab_nodes, r"5 nodes.*\(batch, nodes\)"),
            ],
        ),
    ],
    ids=["sample_hops", "sample_pointers"],
)
def test_sharing_samplers_name_their_mistakes(check, answer, wrong, capsys):
    returned, out = verdict(check, answer, capsys)
    assert returned is answer and out.startswith("✓ Correct!"), out
    for candidate, message in wrong:
        assert_rejected(check, candidate, message, capsys)
    returned, out = verdict(check, stub, capsys)
    assert returned is check.fallback and out == check.stub_output("stub")
