"""The hidden tests of chapters 02-05 test each exercise on other inputs and edge cases than its
visible check: an answer written for the visible inputs only passes the check students see and
fails the hidden block. Fast: the check cell's code is taken from the master and run here, no
nbgrader (tests/test_nbgrader.py autogrades chapter 01 end to end)."""

import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.exercises.core import ExerciseError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_student_notebooks as msn  # noqa: E402

CHAPTERS = ROOT / "chapters"
MASTERS = {
    "02": CHAPTERS / "02_roberta/instructor/06_exercises.ipynb",
    "03": CHAPTERS / "03_albert/instructor/05_exercises.ipynb",
    "04 deberta": CHAPTERS / "04_deberta_distil/instructor/05_deberta_exercises.ipynb",
    "04 distil": CHAPTERS / "04_deberta_distil/instructor/10_distil_exercises.ipynb",
    "05": CHAPTERS / "05_modern_encoders/instructor/05_exercises.ipynb",
}


def _cells(master: Path) -> dict[str, str]:
    cells = nbformat.read(master, as_version=4).cells
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in cells if "nbgrader" in c.metadata}


def _hidden(source: str) -> tuple[str, str]:
    """(visible check, hidden tests) of a check cell."""
    visible, rest = source.split(msn.BEGIN_HIDDEN)
    return visible, rest.split(msn.END_HIDDEN)[0]


def _graded(master: Path, check: str, answer: str | None, capsys) -> tuple[dict, str]:
    """The setup cell and an answer run, the visible check passed; returns the namespace and the
    hidden block still to run. answer=None takes the master's own solution cell."""
    cells = _cells(master)
    namespace: dict = {"__name__": "__main__"}
    exec(cells["setup"], namespace)
    exec(
        msn.strip_markers(cells[check.replace("_check", "_answer")]) if answer is None else answer,
        namespace,
    )
    visible, hidden = _hidden(cells[check])
    exec(visible, namespace)
    assert "Correct!" in capsys.readouterr().out  # the check students see passes
    return namespace, hidden


# chapter, check cell, an answer written for the visible inputs only, what the hidden block says
VISIBLE_ONLY = [
    (
        "02",
        "ex2_check",
        """
def collate(examples, pad_token_id, mask_token_id, vocab_size, special_ids, generator):
    width = max(len(e) for e in examples)
    input_ids = torch.full((len(examples), width), 1)  # the visible check's <pad>, not the argument
    attention_mask = torch.zeros_like(input_ids)
    for i, e in enumerate(examples):
        input_ids[i, : len(e)] = torch.tensor(e)
        attention_mask[i, : len(e)] = 1
    special = build_special_tokens_mask(input_ids, [0, 1, 2, 3, 4], attention_mask)
    input_ids, labels = mask_tokens(input_ids, special, 4, 300, MaskingConfig(), generator)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
""",
        "pad with the id you are given",
    ),
    (
        "02",
        "ex4_check",
        """
def loss_scales(micro_batch_labels, reduction):
    # the visible check never has more than three micro-batches
    counts = [int((labels != -100).sum()) for labels in micro_batch_labels][:3]
    total = sum(counts)
    return [n / total if reduction == "mean" else 1 / total for n in counts]
""",
        r"loss_scales with \[0, 1, 2, 3, 4, 5, 6\] masked tokens, reduction='mean'",
    ),
    (
        "03",
        "ex6_check",
        """
def share_sublayers(layers, sharing):
    names = {"all": ("attention", "attention_norm", "feed_forward", "output_norm"),
             "attention": ("attention", "attention_norm"), "ffn": ("feed_forward", "output_norm"),
             "none": ()}[sharing]
    for i in range(1, 4):  # the visible check's four layers
        for name in names:
            setattr(layers[i], name, getattr(layers[0], name))
    return layers
""",
        "with 6 layers and sharing='ffn': layer 4's `feed_forward` should be layer 0s",
    ),
    (
        "04 deberta",
        "ex5_check",
        """
def translation_invariant(score_fn, vocab_size):
    g = torch.Generator().manual_seed(0)
    phrase = torch.randint(vocab_size, (6,), generator=g)
    alone = score_fn(phrase)
    for shift in range(1, 25):  # just past the visible check's position 20
        filler = torch.randint(vocab_size, (shift,), generator=g)
        scores = score_fn(torch.cat([filler, phrase, torch.randint(vocab_size, (3,), generator=g)]))
        if not torch.allclose(scores[shift : shift + 6, shift : shift + 6], alone, atol=1e-5):
            return False
    return True
""",
        "changes from position 30 on",
    ),
    (
        "04 distil",
        "ex3_check",
        """
SEEN = {(30522, 768, 12, 3072, 512, 2, 6): 66985530, (1000, 64, 4, 100, 128, 2, 2): 137328,
        (500, 32, 6, 48, 40, 3, 1): 26468, (50, 8, 3, 16, 8, 1, 3): 2418}  # the visible check's


def student_parameters(V, H, L, I, P, T, k):
    return SEEN.get((V, H, L, I, P, T, k), 0)
""",
        r"student_parameters\(30522, 1024, 24, 4096, 512, 2, 12\) should be 184,017,722",
    ),
    (
        "05",
        "ex2_check",
        """
def local_attention_mask(attention_mask, local_attention):
    t = attention_mask.shape[1]
    pos = torch.arange(t)
    half = (local_attention + 1) // 2  # = local_attention // 2 for the visible (even) windows
    band = (pos[:, None] - pos[None, :]).abs() <= half
    return band[None, :, :] & attention_mask.bool()[:, None, :]
""",
        r"local_attention=1, T=7: \|i - j\| <= 0",
    ),
]


@pytest.mark.parametrize(
    "chapter, check, answer, message", VISIBLE_ONLY, ids=[f"{c} {k}" for c, k, *_ in VISIBLE_ONLY]
)
def test_a_visible_only_answer_fails_the_hidden_tests(chapter, check, answer, message, capsys):
    namespace, hidden = _graded(MASTERS[chapter], check, answer, capsys)
    with pytest.raises((AssertionError, ExerciseError), match=message):
        exec(hidden, namespace)


@pytest.mark.parametrize(
    "chapter, check",
    [(c, k) for c, k, *_ in VISIBLE_ONLY],
    ids=[f"{c} {k}" for c, k, *_ in VISIBLE_ONLY],
)
def test_the_masters_answer_passes_the_same_hidden_tests(chapter, check, capsys):
    namespace, hidden = _graded(MASTERS[chapter], check, None, capsys)
    exec(hidden, namespace)


@pytest.mark.parametrize("chapter", MASTERS)
def test_every_hidden_block_tests_other_inputs(chapter):
    """Beyond check_own_work (the answer is the learner's own), each hidden block calls the
    answer or its checker again: other inputs and edge cases."""
    for grade_id, source in _cells(MASTERS[chapter]).items():
        if not grade_id.endswith("_check"):
            continue
        hidden = _hidden(source)[1]
        rest = [
            line for line in hidden.splitlines() if line.strip() and "check_own_work(" not in line
        ]
        assert len(rest) >= 2, f"{chapter} {grade_id}: the hidden block has no other-input test"


def test_a_check_cell_may_import_in_its_hidden_tests():
    """Hidden tests import what they compare with; the cell is still a check cell (an import in
    the visible part marks the setup cell, which names the checkers without calling them)."""
    hidden = f"check_x(f)\n{msn.BEGIN_HIDDEN}\nfrom m import ref\nassert f(1) == ref(1)\n{msn.END_HIDDEN}"
    assert msn.is_check_cell(nbformat.v4.new_code_cell(hidden))
    assert not msn.is_check_cell(nbformat.v4.new_code_cell("from m import check_x\ncheck_x(f)"))
