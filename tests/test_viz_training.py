"""Training plots: history panels, run comparison, EMA smoothing and the masking illustration."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex

from course_lib.viz.training import (
    MASK_COLOURS,
    classify_masking,
    compare_runs,
    metric_series,
    plot_history,
    plot_masking,
    smooth_ema,
)


def make_history(steps: int = 20, eval_every: int = 5, task: str = "nsp") -> list[dict]:
    """Shaped like the engine's log: train numbers every step, eval numbers every few."""
    history = []
    for step in range(1, steps + 1):
        row = {
            "step": step,
            "train_loss": 10.0 / step,
            "lr": 1e-3 * step / steps,
            "tokens_per_s": 1000.0 + step,
            "elapsed_s": 0.5 * step,
        }
        if step % eval_every == 0:
            row.update(
                {
                    "eval_mlm_loss": 12.0 / step,
                    "eval_mlm_accuracy": step / (2 * steps),
                    f"eval_{task}_accuracy": 0.5 + step / (4 * steps),
                }
            )
        history.append(row)
    return history


def lines_by_label(ax) -> dict[str, object]:
    return {line.get_label(): line for line in ax.lines}


def test_history_gets_one_panel_per_kind_of_metric():
    history = make_history()
    fig = plot_history(history)
    assert [ax.get_ylabel() for ax in fig.axes] == [
        "loss",
        "accuracy",
        "learning rate",
        "throughput",
    ]
    loss, accuracy, lr, throughput = fig.axes
    assert set(lines_by_label(loss)) == {"train_loss", "eval_mlm_loss"}
    assert set(lines_by_label(accuracy)) == {"eval_mlm_accuracy", "eval_nsp_accuracy"}
    assert set(lines_by_label(lr)) == {"lr"} and set(lines_by_label(throughput)) == {"tokens_per_s"}
    train = lines_by_label(loss)["train_loss"]
    np.testing.assert_allclose(train.get_xdata(), np.arange(1, 21))
    np.testing.assert_allclose(train.get_ydata(), [10.0 / s for s in range(1, 21)])
    evaluation = lines_by_label(loss)["eval_mlm_loss"]
    np.testing.assert_allclose(evaluation.get_xdata(), [5, 10, 15, 20])
    assert evaluation.get_marker() == "o" and train.get_marker() in (None, "None", "")
    assert fig.axes[-1].get_xlabel() == "step"
    # elapsed_s is a counter, not a metric: skipped unless asked for.
    assert "elapsed_s" not in {label for ax in fig.axes for label in lines_by_label(ax)}


def test_history_key_selection_and_trainer_objects():
    trainer = types.SimpleNamespace(history=make_history(task="sop"))
    fig = plot_history(trainer, keys=["eval_sop_accuracy", "elapsed_s"])
    assert [ax.get_ylabel() for ax in fig.axes] == ["accuracy", "elapsed_s"]
    with pytest.raises(
        ValueError, match=r"no numeric \['eval_nsp_accuracy'\].*'eval_sop_accuracy'"
    ):
        plot_history(trainer, keys=["eval_nsp_accuracy"])
    with pytest.raises(ValueError, match="empty"):
        plot_history([])
    with pytest.raises(TypeError, match="list of dicts"):
        plot_history({"train_loss": 1.0})


def test_x_axis_falls_back_to_the_entry_index():
    xs, ys = metric_series([{"loss": 3.0}, {"other": 1}, {"loss": 1.0}], "loss")
    np.testing.assert_array_equal(xs, [0, 2])
    np.testing.assert_array_equal(ys, [3.0, 1.0])
    xs, _ = metric_series([{"loss": float("nan")}, {"loss": True}, {"loss": None}], "loss")
    assert len(xs) == 0  # NaN, bools and None are not numbers to plot


def test_smoothing_is_a_bias_corrected_ema():
    np.testing.assert_allclose(smooth_ema(np.array([4.0, 4.0, 4.0]), 0.9), [4.0, 4.0, 4.0])
    np.testing.assert_allclose(smooth_ema(np.array([0.0, 1.0]), 0.5), [0.0, 0.5 / 0.75])
    with pytest.raises(ValueError, match="smooth=1.0 is invalid"):
        smooth_ema(np.array([1.0]), 1.0)
    fig = plot_history(make_history(), keys=["train_loss", "eval_mlm_loss"], smooth=0.5)
    lines = fig.axes[0].lines
    # train_loss: faint raw + smoothed (labelled); eval_mlm_loss is sparse: drawn raw only.
    assert len(lines) == 3
    smoothed = lines_by_label(fig.axes[0])["train_loss"]
    raw = np.array([10.0 / s for s in range(1, 21)])
    np.testing.assert_allclose(smoothed.get_ydata(), smooth_ema(raw, 0.5))


def test_compare_runs_draws_one_line_per_run_and_metric():
    runs = {"NSP": make_history(task="nsp"), "SOP": make_history(steps=10, task="sop")}
    fig = compare_runs(runs, ["eval_mlm_loss", "train_loss"])
    assert [ax.get_title() for ax in fig.axes] == ["eval_mlm_loss", "train_loss"]
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert labels == [f"NSP (final {12.0 / 20:.4g})", f"SOP (final {12.0 / 10:.4g})"]
    np.testing.assert_allclose(fig.axes[1].lines[1].get_ydata(), [10.0 / s for s in range(1, 11)])
    with pytest.raises(ValueError, match=r"run 'SOP' has no \['eval_nsp_accuracy'\]"):
        compare_runs(runs, "eval_nsp_accuracy")
    with pytest.raises(ValueError, match="no runs"):
        compare_runs({}, "train_loss")


MASK_ID = 4
ORIGINAL = [1, 10, 11, 12, 13, 14, 15, 2]
MASKED = [1, MASK_ID, 11, 99, 13, MASK_ID, 15, 2]
LABELS = [-100, 10, -100, 12, 13, 14, -100, -100]
TOKENS = ["[CLS]", "the", "cat", "sat", "on", "mat", "today", "[SEP]"]


def test_classify_masking():
    want = [
        "not selected",
        "masked",
        "not selected",
        "random",
        "kept",
        "masked",
        "not selected",
        "not selected",
    ]
    assert classify_masking(ORIGINAL, MASKED, LABELS, MASK_ID) == want
    as_batch = [torch.tensor([x]) for x in (ORIGINAL, MASKED, LABELS)]
    assert classify_masking(*as_batch, MASK_ID) == want
    with pytest.raises(ValueError, match="lengths differ: original_ids 8, masked_ids 7"):
        classify_masking(ORIGINAL, MASKED[:7], LABELS, MASK_ID)
    with pytest.raises(ValueError, match="one sequence of ids"):
        classify_masking([ORIGINAL, ORIGINAL], [MASKED, MASKED], [LABELS, LABELS], MASK_ID)


def test_plot_masking_colours_each_token_by_category():
    class Tok:
        def convert_ids_to_tokens(self, ids):
            return ["[MASK]" if i == MASK_ID else ("dog" if i == 99 else f"w{i}") for i in ids]

    fig = plot_masking(TOKENS, ORIGINAL, MASKED, LABELS, MASK_ID, tokenizer=Tok(), per_row=5)
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if p.get_gid()]
    assert [b.get_gid() for b in boxes] == classify_masking(ORIGINAL, MASKED, LABELS, MASK_ID)
    for box in boxes:
        assert to_hex(box.get_facecolor()) == MASK_COLOURS[box.get_gid()]
    # Two rows of at most 5: positions 0..4 on the first row, 5..7 below.
    assert [b.get_x() for b in boxes[:5]] == pytest.approx([0.05, 1.05, 2.05, 3.05, 4.05])
    assert boxes[5].get_y() < boxes[0].get_y() and boxes[5].get_x() == pytest.approx(0.05)
    texts = [t.get_text() for t in ax.texts]
    assert texts[:2] == ["[CLS]", "the"]
    assert "→ [MASK]" in texts and "→ dog" in texts and texts.count("→ [MASK]") == 2
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [
        "not selected 4",
        "masked 2 (50% of selected)",
        "random 1 (25% of selected)",
        "kept 1 (25% of selected)",
    ]
    assert ax.get_title() == "4 of 8 tokens selected (50%)"


def test_plot_masking_without_tokenizer_and_errors():
    fig = plot_masking(TOKENS, ORIGINAL, MASKED, LABELS, MASK_ID)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "→ [MASK]" in texts and "→ id 99" in texts
    with pytest.raises(ValueError, match="7 tokens for 8 ids"):
        plot_masking(TOKENS[:7], ORIGINAL, MASKED, LABELS, MASK_ID)
    with pytest.raises(ValueError, match="per_row=0 is invalid"):
        plot_masking(TOKENS, ORIGINAL, MASKED, LABELS, MASK_ID, per_row=0)


def test_masking_illustration_of_the_course_masking():
    train = pytest.importorskip("course_lib.tokenization.train")
    masking = pytest.importorskip("course_lib.objectives.masking")
    texts = ["the cat sat on the mat", "a dog ran in the park", "the bird sang a song"] * 4
    tokenizer = train.train_tokenizer("bert", texts, vocab_size=60)
    ids = torch.tensor(
        [tokenizer.encode("the cat sat on the mat and a dog ran in the park")["input_ids"]]
    )
    special = masking.build_special_tokens_mask(ids, tokenizer.special_ids)
    masked, labels = masking.mask_tokens(
        ids,
        special,
        tokenizer.mask_token_id,
        200,  # ids past the vocabulary: shown as "id N"
        masking.MaskingConfig(mlm_probability=0.6),
        torch.Generator().manual_seed(0),
    )
    tokens = tokenizer.convert_ids_to_tokens(ids[0].tolist())
    categories = classify_masking(ids, masked, labels, tokenizer.mask_token_id)
    selected = (labels[0] != -100).tolist()
    assert [c != "not selected" for c in categories] == selected
    assert categories[0] == categories[-1] == "not selected"  # [CLS] and [SEP] are never picked
    fig = plot_masking(tokens, ids, masked, labels, tokenizer.mask_token_id, tokenizer=tokenizer)
    texts_drawn = [t.get_text() for t in fig.axes[0].texts]
    assert texts_drawn.count("→ [MASK]") == categories.count("masked")
    assert "→ None" not in texts_drawn
    assert fig.axes[0].get_title().startswith(f"{sum(selected)} of {len(tokens)} tokens selected")
