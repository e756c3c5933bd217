"""Chapter 05's build checks (course_lib.exercises.lessons_modern): each fails on its stub with
what to write, names typical wrong answers (including ones right only at typical sizes) with
specific messages, returns the library's version for them, and accepts the master's answer."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from lesson_masters import master_answer
from torch import nn

from course_lib.exercises import lessons_modern as lm
from course_lib.labels import IGNORE_INDEX
from course_lib.objectives.rtd import GDESEmbedding, corrupt, sample_replacements

INSTRUCTOR = Path(__file__).resolve().parents[1] / "chapters" / "05_modern_encoders" / "instructor"


def run(check, candidate, capsys):
    """Call the check; return (what it returned, what it printed)."""
    got = check(candidate)
    return got, capsys.readouterr().out


def stub(*args, **kwargs):
    raise NotImplementedError()


class StubGDES(nn.Module):
    def __init__(self, generator_table):
        super().__init__()
        self.generator_table = generator_table
        self.delta = nn.Parameter(torch.zeros_like(generator_table.weight))

    def forward(self, ids):
        raise NotImplementedError()


CHECKS = {  # check -> (stub, the library's fallback)
    "sample": (lm.check_sample, stub, sample_replacements),
    "corrupt": (lm.check_corrupt, stub, corrupt),
    "rtd_loss": (lm.check_rtd_loss, stub, lm.library_rtd_loss),
    "gdes": (lm.check_gdes, StubGDES, GDESEmbedding),
    "rope": (lm.check_rope, stub, lm.library_rope),
    "geglu": (lm.check_geglu, stub, lm.library_geglu),
    "pack": (lm.check_pack, stub, lm.library_pack),
}


@pytest.mark.parametrize("name", CHECKS)
def test_a_stub_is_not_written_yet_and_the_library_takes_over(name, capsys):
    check, candidate, fallback = CHECKS[name]
    got, out = run(check, candidate, capsys)
    assert got is fallback
    assert out.startswith("· Not written yet:") and check.todo in out
    assert "uses the library's" in out
    assert out == check.stub_output(candidate.__name__)


# ----- typical wrong answers, each named ---------------------------------------------------------


def sample_argmax(logits, generator):
    return logits.argmax(-1)


def sample_squeeze_all(logits, generator):  # right for n > 1 only
    return torch.multinomial(logits.detach().softmax(-1), 1, generator=generator).squeeze()


def sample_naive_exp(logits, generator):  # right while logits are small
    p = logits.detach().exp()
    return torch.multinomial(p / p.sum(-1, keepdim=True), 1, generator=generator).squeeze(-1)


def sample_global_rng(logits, generator):
    return torch.multinomial(logits.detach().softmax(-1), 1).squeeze(-1)


def corrupt_selected(input_ids, labels, sampled):
    selected = labels != IGNORE_INDEX
    out = input_ids.clone()
    out[selected] = sampled
    return out, selected.long()


def corrupt_vs_input(input_ids, labels, sampled):
    selected = labels != IGNORE_INDEX
    out = input_ids.clone()
    out[selected] = sampled
    return out, (out != input_ids).long()


def corrupt_in_place(input_ids, labels, sampled):
    selected = labels != IGNORE_INDEX
    original = torch.where(selected, labels, input_ids)
    input_ids[selected] = sampled
    return input_ids, (input_ids != original).long()


def loss_with_padding(gen_logits, targets, disc_logits, labels, mask, weight=50.0):
    l_mlm = F.cross_entropy(gen_logits, targets)
    l_disc = F.binary_cross_entropy_with_logits(disc_logits, labels.float())
    return l_mlm + weight * l_disc, l_mlm, l_disc


def loss_sigmoid_bce(
    gen_logits, targets, disc_logits, labels, mask, weight=50.0
):  # right at small logits
    real = mask.bool()
    l_mlm = F.cross_entropy(gen_logits, targets)
    l_disc = F.binary_cross_entropy(disc_logits[real].sigmoid(), labels[real].float())
    return l_mlm + weight * l_disc, l_mlm, l_disc


def loss_weight_on_mlm(gen_logits, targets, disc_logits, labels, mask, weight=50.0):
    real = mask.bool()
    l_mlm = F.cross_entropy(gen_logits, targets)
    l_disc = F.binary_cross_entropy_with_logits(disc_logits[real], labels[real].float())
    return weight * l_mlm + l_disc, l_mlm, l_disc


def loss_fixed_50(gen_logits, targets, disc_logits, labels, mask, weight=50.0):  # right at 50 only
    real = mask.bool()
    l_mlm = F.cross_entropy(gen_logits, targets)
    l_disc = F.binary_cross_entropy_with_logits(disc_logits[real], labels[real].float())
    return l_mlm + 50 * l_disc, l_mlm, l_disc


class GDESNoStop(StubGDES):
    def forward(self, ids):
        return F.embedding(ids, self.generator_table.weight + self.delta)


class GDESAllDetached(StubGDES):
    def forward(self, ids):
        return F.embedding(ids, (self.generator_table.weight + self.delta).detach())


class GDESFrozen(StubGDES):
    def forward(self, ids):
        self.generator_table.weight.requires_grad_(False)
        return F.embedding(ids, self.generator_table.weight + self.delta)


class GDESNoDelta(StubGDES):
    def forward(self, ids):
        return F.embedding(ids, self.generator_table.weight.detach())


def _rope(x, positions, theta, adjacent=False, sign=1.0, step=2.0, own_positions=False):
    d = x.shape[-1]
    if own_positions:
        positions = torch.arange(len(positions))
    freq = theta ** (-torch.arange(0, d // 2).float() * step / d)
    angle = sign * positions[:, None].float() * freq
    a, b = (x[..., 0::2], x[..., 1::2]) if adjacent else (x[..., : d // 2], x[..., d // 2 :])
    ra, rb = a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()
    return torch.stack([ra, rb], -1).flatten(-2) if adjacent else torch.cat([ra, rb], -1)


def rope_hardcoded_arange(x, positions, theta):  # right while positions are 0..T-1
    return _rope(x, positions, theta, own_positions=True)


def rope_quarter_split(x, positions, theta):  # right only when d/2 is even
    d = x.shape[-1]
    if d % 4:
        return _rope(x, positions, theta, adjacent=True)
    return _rope(x, positions, theta)


def geglu_swapped(x, w_in, w_out):
    a, b = (x @ w_in.T).chunk(2, dim=-1)
    return (F.gelu(b) * a) @ w_out.T


def geglu_tanh(x, w_in, w_out):
    a, b = (x @ w_in.T).chunk(2, dim=-1)
    return (F.gelu(a, approximate="tanh") * b) @ w_out.T


def geglu_two_dims(x, w_in, w_out):  # right for a batch of sequences only
    h = torch.einsum("bth,ih->bti", x, w_in)
    a, b = h.chunk(2, dim=-1)
    return torch.einsum("bti,hi->bth", F.gelu(a) * b, w_out)


def pack_end_padding(x, keep):  # right with right padding only
    lengths = keep.sum(1)
    rows = torch.cat([x[b, : int(n)] for b, n in enumerate(lengths)])
    return rows, [0, *torch.cumsum(lengths, 0).tolist()]


def pack_int_mask(x, keep):
    return x.flatten(0, 1)[keep.flatten()], [0, *torch.cumsum(keep.sum(1), 0).tolist()]


def pack_lengths(x, keep):
    return x[keep.bool()], keep.sum(1).tolist()


def pack_no_zero(x, keep):
    return x[keep.bool()], torch.cumsum(keep.sum(1), 0).tolist()


WRONG = [  # (check, wrong answer, the message that names it)
    ("sample", sample_argmax, "the argmax"),
    ("sample", sample_squeeze_all, r"ONE masked position .* a bare \.squeeze\(\)"),
    ("sample", sample_naive_exp, "exp\\(1000\\) overflows"),
    ("sample", sample_global_rng, "seeded alike drew different tokens"),
    ("corrupt", corrupt_selected, "kept its own token"),
    ("corrupt", corrupt_vs_input, "Compare with the ORIGINAL"),
    ("corrupt", corrupt_in_place, "changed its input `input_ids`"),
    ("rtd_loss", loss_with_padding, "padding included"),
    ("rtd_loss", loss_sigmoid_bce, "sigmoid\\(40\\) rounds to 1.0"),
    ("rtd_loss", loss_weight_on_mlm, "multiplies L_mlm"),
    ("rtd_loss", loss_fixed_50, "with weight 1: L is .*the `weight` argument"),
    ("gdes", GDESNoStop, "plain embedding sharing"),
    ("gdes", GDESAllDetached, "does not reach E_delta"),
    ("gdes", GDESFrozen, "no longer requires a gradient"),
    ("gdes", GDESNoDelta, "after E_delta changed"),
    ("rope", lambda x, p, t: _rope(x, p, t, adjacent=True), "pair neighbouring features"),
    ("rope", lambda x, p, t: _rope(x, p, t, sign=-1.0), "turns the wrong way"),
    ("rope", lambda x, p, t: _rope(x, p, t, step=1.0), "θ\\^\\(-p/d\\)"),
    ("rope", rope_hardcoded_arange, r"positions \[5, 2, 100, 0\].*not by positions\[m\]"),
    ("rope", rope_quarter_split, "d = 6: an odd number of pairs"),
    ("geglu", geglu_swapped, "GELU gates the wrong half"),
    ("geglu", geglu_tanh, "tanh approximation"),
    ("geglu", geglu_two_dims, "a single vector x of shape"),
    ("pack", pack_end_padding, "LEFT padding"),
    ("pack", pack_int_mask, "0/1 integers"),
    ("pack", pack_lengths, "those are the lengths"),
    ("pack", pack_no_zero, "the first offset, 0, is missing"),
]


@pytest.mark.parametrize(("name", "wrong", "message"), WRONG)
def test_a_typical_mistake_is_named_and_the_library_takes_over(name, wrong, message, capsys):
    check, _, fallback = CHECKS[name]
    got, out = run(check, wrong, capsys)
    assert got is fallback
    assert out.startswith("✗ ")
    assert re.search(message, out), out
    assert "uses the library's" in out


def test_a_check_leaves_the_global_random_state_alone(capsys):
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    lm.check_gdes(GDESNoStop)
    lm.check_sample(sample_replacements)
    assert torch.equal(torch.rand(3), expected)


# ----- the masters' answers ----------------------------------------------------------------------

MASTERS = {  # notebook -> {answer name: check}
    "01_replaced_token_detection.ipynb": {
        "my_sample": lm.check_sample,
        "my_corrupt": lm.check_corrupt,
        "my_rtd_loss": lm.check_rtd_loss,
    },
    "02_rtd_vs_mlm.ipynb": {"GDESEmbedding": lm.check_gdes},
    "03_modernbert_parts.ipynb": {"rope_by_hand": lm.check_rope, "geglu_by_hand": lm.check_geglu},
    "04_long_context_and_speed.ipynb": {"my_pack": lm.check_pack},
}


@pytest.mark.parametrize(
    ("notebook", "name"), [(nb, name) for nb, names in MASTERS.items() for name in names]
)
def test_the_masters_answer_is_correct(notebook, name, capsys):
    candidate = master_answer("05_modern_encoders", notebook, name, IGNORE_INDEX=IGNORE_INDEX)
    got, out = run(MASTERS[notebook][name], candidate, capsys)
    assert out.startswith("✓ Correct!"), out
    assert got is candidate


def test_every_build_cell_of_the_masters_is_checked():
    for notebook, names in MASTERS.items():
        nb = nbformat.read(INSTRUCTOR / notebook, as_version=4)
        builds = [c for c in nb.cells if "build" in c.metadata.get("tags", [])]
        assert len(builds) == len(names), notebook
        for cell in builds:
            assert any(f"def {n}(" in cell.source or f"class {n}(" in cell.source for n in names)
