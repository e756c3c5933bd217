"""The offline attention explorer, its summaries and the bertviz wrappers, on hand-built maps."""

from __future__ import annotations

import base64
import io
import math
import types

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from course_lib.viz import _figure
from course_lib.viz.attention import (
    AttentionExplorer,
    as_attention_maps,
    attention_grid,
    attention_heatmap,
    compute_attentions,
    format_head_summaries,
    head_summaries,
    plot_head_summaries,
    show_attention,
)
from course_lib.viz.bertviz_view import (
    bertviz_head_view,
    bertviz_model_view,
    estimate_html_bytes,
)

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]
N = len(TOKENS)


def pattern(kind: str, n: int = N) -> np.ndarray:
    """Attention rows with a known answer for every summary."""
    p = np.zeros((n, n))
    if kind == "cls":
        p[:, 0] = 1
    elif kind == "previous":
        for q in range(n):
            p[q, max(q - 1, 0)] = 1
    elif kind == "next":
        for q in range(n):
            p[q, min(q + 1, n - 1)] = 1
    elif kind == "uniform":
        p[:] = 1 / n
    elif kind == "self_sep":  # half on itself, half on [SEP] (the last token)
        for q in range(n):
            p[q, q] += 0.5
            p[q, n - 1] += 0.5
    return p


# layers x heads of known patterns: layer 0 = [cls, previous, next], layer 1 = [uniform, self_sep, cls]
KINDS = [["cls", "previous", "next"], ["uniform", "self_sep", "cls"]]
MAPS = np.stack([np.stack([pattern(k) for k in row]) for row in KINDS]).astype(np.float32)
ATTENTIONS = tuple(torch.from_numpy(MAPS[layer])[None] for layer in range(2))  # model output form


def expected(kind: str, n: int = N) -> dict[str, float]:
    """The summaries of `pattern(kind)` worked out by hand."""
    return {
        "cls": {"cls": 1, "previous": 2 / n, "next": 0, "uniform": 1 / n, "self_sep": 0.5 / n}[
            kind
        ],
        "sep": {
            "cls": 0,
            "previous": 0,
            "next": 2 / n,
            "uniform": 1 / n,
            "self_sep": (0.5 * n + 0.5) / n,
        }[kind],
        "self": {
            "cls": 1 / n,
            "previous": 1 / n,
            "next": 1 / n,
            "uniform": 1 / n,
            "self_sep": (0.5 * (n - 1) + 1) / n,
        }[kind],
        "previous": {"cls": 1 / (n - 1), "previous": 1, "next": 0, "uniform": 1 / n, "self_sep": 0}[
            kind
        ],
        "next": {"cls": 0, "previous": 0, "next": 1, "uniform": 1 / n, "self_sep": 0.5 / (n - 1)}[
            kind
        ],
        "entropy": {
            "cls": 0,
            "previous": 0,
            "next": 0,
            "uniform": math.log2(n),
            "self_sep": (n - 1) / n,
        }[kind],
    }


def test_head_summaries_match_hand_computed_values():
    rows = head_summaries(ATTENTIONS, TOKENS)
    assert [(r["layer"], r["head"]) for r in rows] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
    ]
    for row in rows:
        want = expected(KINDS[row["layer"]][row["head"]])
        for key, value in want.items():
            assert row[key] == pytest.approx(value, abs=1e-6), (row["layer"], row["head"], key)


def test_head_summaries_positions_and_roberta_tokens():
    roberta = ["<s>", "the", "cat", "sat", "</s>"]
    assert head_summaries(ATTENTIONS, roberta) == head_summaries(ATTENTIONS, TOKENS)
    # Explicit positions win over tokens; unknown positions give NaN rather than a fake 0.
    moved = head_summaries(ATTENTIONS, cls_positions=[4], sep_positions=[0])
    assert moved[0]["cls"] == pytest.approx(0.0) and moved[0]["sep"] == pytest.approx(1.0)
    unknown = head_summaries(ATTENTIONS)
    assert math.isnan(unknown[0]["cls"]) and math.isnan(unknown[0]["sep"])
    assert unknown[1]["previous"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="outside the sequence of length 5"):
        head_summaries(ATTENTIONS, cls_positions=[7])


def test_head_summaries_refuse_scores_and_bad_tokens():
    scores = {"c2p": [MAPS[0] - 0.3, MAPS[1] - 0.3]}
    with pytest.raises(ValueError, match="need attention probabilities.*'c2p'"):
        head_summaries(scores)
    with pytest.raises(ValueError, match="covers 5 positions but 3 tokens"):
        head_summaries(ATTENTIONS, TOKENS[:3])


def test_format_head_summaries_is_one_line_per_head():
    text = format_head_summaries(head_summaries(ATTENTIONS, TOKENS))
    lines = text.splitlines()
    assert len(lines) == 1 + 6 and lines[0].split() == [
        "layer",
        "head",
        "cls",
        "sep",
        "self",
        "previous",
        "next",
        "entropy",
    ]
    assert lines[4].split()[:3] == ["1", "0", "0.20"]  # layer 1 head 0 is uniform over 5 tokens
    assert lines[4].split()[-1] == f"{math.log2(5):.2f}"


def test_all_input_forms_normalise_to_the_same_maps():
    want = MAPS
    forms = {
        "tuple of [1,H,S,S] tensors": ATTENTIONS,
        "list of [H,S,S] arrays": [MAPS[0], MAPS[1]],
        "stacked [L,H,S,S]": MAPS,
        "stacked [L,B,H,S,S], batch 1": np.stack([np.zeros_like(MAPS), MAPS], axis=1),
    }
    for name, form in forms.items():
        batch_index = 1 if "batch 1" in name else 0
        maps = as_attention_maps(form, batch_index=batch_index)
        assert list(maps) == ["attention"], name
        np.testing.assert_allclose(maps["attention"], want, err_msg=name)
    per_layer_dicts = [{"c2c": MAPS[layer], "c2p": -MAPS[layer]} for layer in range(2)]
    dict_of_layers = {"c2c": list(MAPS), "c2p": list(-MAPS)}
    for form in (per_layer_dicts, dict_of_layers):
        maps = as_attention_maps(form)
        assert list(maps) == ["c2c", "c2p"]
        np.testing.assert_allclose(maps["c2p"], -want)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (None, "output_attentions=True"),
        ([], "empty sequence"),
        ([MAPS[0], MAPS[1][:, :4, :4]], "different shapes"),
        (np.zeros((2, 3, 5, 4)), "query length == key length"),
        (np.zeros((5, 5)), "got shape"),
        ([{"c2c": MAPS[0]}, {"p2c": MAPS[1]}], "same named maps"),
    ],
)
def test_bad_attention_inputs_say_what_is_wrong(bad, message):
    with pytest.raises(ValueError, match=message):
        as_attention_maps(bad)


def test_batch_index_out_of_range():
    with pytest.raises(ValueError, match="batch_index=3 is out of range.*batch of 1"):
        as_attention_maps(ATTENTIONS, batch_index=3)


def test_heatmap_shows_the_matrix_with_tokens():
    ax = attention_heatmap(MAPS[0, 1], TOKENS, title="t", sentence_b_start=3)
    fig = ax.figure
    assert len(fig.axes) == 2  # heatmap + colour bar
    np.testing.assert_allclose(ax.images[0].get_array(), MAPS[0, 1])
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS
    assert [t.get_text() for t in ax.get_yticklabels()] == TOKENS
    assert ax.get_xlabel() == "key (attended to)" and ax.get_ylabel() == "query (attending)"
    assert ax.images[0].get_clim() == (0.0, 1.0)
    uniform = attention_heatmap(MAPS[1, 0], TOKENS)
    assert uniform.images[0].get_clim() == (0.0, pytest.approx(0.2))  # scaled to the map's max
    # Sentence-B separator: one horizontal and one vertical line at 2.5.
    assert sorted(
        line.get_xdata()[0] for line in ax.lines if line.get_xdata()[0] == line.get_xdata()[1]
    ) == [2.5]


def test_heatmap_scores_use_a_diverging_map_centred_on_zero():
    scores = np.array([[1.0, -3.0], [0.5, 2.0]])
    ax = attention_heatmap(scores, ["a", "b"], colorbar=False)
    assert len(ax.figure.axes) == 1
    assert ax.images[0].get_cmap().name == "RdBu_r"
    assert ax.images[0].get_clim() == (-3.0, 3.0)
    with pytest.raises(ValueError, match="draws one head"):
        attention_heatmap(MAPS, TOKENS)
    with pytest.raises(ValueError, match="query axis"):
        attention_heatmap(MAPS[0, 0], TOKENS[:2])


def test_grid_has_one_axes_per_selected_head_with_its_map():
    fig = attention_grid(ATTENTIONS, TOKENS)
    want = [f"layer {layer} head {head}" for layer in range(2) for head in range(3)]
    assert [ax.get_label() for ax in fig.axes] == want
    for ax in fig.axes:
        layer, head = int(ax.get_label().split()[1]), int(ax.get_label().split()[3])
        np.testing.assert_allclose(ax.images[0].get_array(), MAPS[layer, head])
    assert [ax.get_title() for ax in fig.axes[:3]] == ["head 0", "head 1", "head 2"]
    assert [fig.axes[i].get_ylabel() for i in (0, 3)] == ["layer 0", "layer 1"]
    assert [t.get_text() for t in fig.axes[3].get_xticklabels()] == TOKENS  # bottom row
    sub = attention_grid(ATTENTIONS, layers=[1], heads=[2, 0])
    assert [ax.get_label() for ax in sub.axes] == ["layer 1 head 2", "layer 1 head 0"]
    with pytest.raises(ValueError, match=r"layers=\[2\] invalid: the model has 2 layers"):
        attention_grid(ATTENTIONS, layers=[2])


def test_plot_head_summaries_panels_hold_the_values():
    rows = head_summaries(ATTENTIONS, TOKENS)
    fig = plot_head_summaries(rows)
    assert [ax.get_title() for ax in fig.axes] == [
        "share to [CLS]",
        "share to [SEP]",
        "share to itself",
        "share to previous token",
        "share to next token",
        "entropy (bits)",
    ]
    # three panels per row, so that each stays readable: 2 rows x 3 columns for six keys
    spans = [
        (ax.get_subplotspec().rowspan.start, ax.get_subplotspec().colspan.start) for ax in fig.axes
    ]
    assert spans == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    two = plot_head_summaries(rows, keys=["cls", "entropy"])
    assert len(two.axes) == 2 and [ax.get_subplotspec().colspan.start for ax in two.axes] == [0, 1]
    four = plot_head_summaries(rows, keys=["cls", "sep", "self", "entropy"])
    assert len(four.axes) == 4  # the two empty cells of the second row are removed
    cls_panel = fig.axes[0].images[0].get_array()
    assert cls_panel.shape == (2, 3)
    np.testing.assert_allclose(cls_panel, [[1, 2 / 5, 0], [1 / 5, 0.1, 1]], atol=1e-6)
    assert "1.00" in [t.get_text() for t in fig.axes[0].texts]


def _png(bundle_value: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(bundle_value)))


class FakeDisplay:
    """Stands in for IPython.display.display: records outputs and display-handle updates."""

    def __init__(self) -> None:
        self.outputs: list[dict] = []
        self.updates: list[dict] = []

    def __call__(self, obj, raw=False, display_id=None):
        assert raw, "the explorer sends ready-made MIME bundles"
        self.outputs.append(obj)
        if display_id:
            return types.SimpleNamespace(update=lambda data, raw: self.updates.append(data))
        return None


@pytest.fixture
def fake_display(monkeypatch):
    import IPython.display

    recorder = FakeDisplay()
    monkeypatch.setattr(IPython.display, "display", recorder)
    return recorder


def test_static_explorer_is_a_png_of_the_selected_head(fake_display):
    explorer = AttentionExplorer(ATTENTIONS, TOKENS, layer=1, head=2, interactive=False)
    explorer._ipython_display_()
    (bundle,) = fake_display.outputs
    assert set(bundle) == {"text/plain", "image/png"}
    assert _png(bundle["image/png"]).size[0] > 200
    assert "layer=1, head=2" in bundle["text/plain"]
    fig = explorer.figure()
    assert fig.axes[0].get_title().startswith("layer 1, head 2")
    assert "cls 1.00" in fig.axes[0].get_title()
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), MAPS[1, 2])


def test_widget_callbacks_redraw_the_figure_output(fake_display):
    explorer = AttentionExplorer(ATTENTIONS, TOKENS, interactive=True)
    explorer._ipython_display_()
    controls_output, figure_output = fake_display.outputs
    # The controls are a widget; the figure is a separate plain PNG output (seen everywhere).
    assert "application/vnd.jupyter.widget-view+json" in controls_output
    assert "image/png" not in controls_output and "run the cell" in controls_output["text/plain"]
    first_png = base64.b64decode(figure_output["image/png"])
    assert first_png[:8] == b"\x89PNG\r\n\x1a\n"
    controls = explorer._controls
    assert controls["term"] not in explorer.controls().children  # one term: no dropdown
    assert explorer.summary()["cls"] == pytest.approx(1.0)  # layer 0 head 0 attends to [CLS]

    controls["head"].value = 1  # the previous-token head
    assert (explorer.layer, explorer.head) == (0, 1)
    assert explorer.summary()["previous"] == pytest.approx(1.0)
    assert fake_display.updates[-1]["image/png"] != figure_output["image/png"]
    assert base64.b64decode(fake_display.updates[-1]["image/png"]) == explorer.png()

    explorer.select(layer=1, head=0)  # programmatic: controls and figure follow
    assert (controls["layer"].value, controls["head"].value) == (1, 0)
    assert f"entropy {math.log2(5):.2f}" in explorer.figure().axes[0].get_title()
    assert base64.b64decode(fake_display.updates[-1]["image/png"]) == explorer.png()

    head_png = fake_display.updates[-1]["image/png"]
    controls["view"].value = "grid"
    assert explorer.view == "grid" and fake_display.updates[-1]["image/png"] != head_png
    grid_png = fake_display.updates[-1]["image/png"]
    controls["layer"].value = 0  # the grid shows every head: same picture
    assert fake_display.updates[-1]["image/png"] == grid_png
    with pytest.raises(ValueError, match="choose one of"):
        explorer.select(view="table")
    with pytest.raises(ValueError, match="heads=\\[3\\] invalid"):
        explorer.select(head=3)


def test_embeddable_widget_keeps_its_image_in_sync():
    explorer = AttentionExplorer(ATTENTIONS, TOKENS, interactive=True)
    panel = explorer.widget()
    assert panel.children == (explorer.controls(), explorer.image)
    before = explorer.image.value
    explorer._controls["head"].value = 2
    assert explorer.image.value == explorer.png() != before


def test_explorer_switches_between_named_terms():
    terms = {"c2c": ATTENTIONS, "c2p": [torch.from_numpy(MAPS[i] - 0.2) for i in range(2)]}
    explorer = AttentionExplorer(terms, TOKENS, interactive=True)
    assert explorer.terms == ["c2c", "c2p"]
    assert explorer._controls == {}  # nothing built until asked for
    controls = explorer.controls()
    assert explorer._controls["term"] in controls.children
    explorer._controls["term"].value = "c2p"
    assert explorer.term == "c2p" and explorer.summary() is None
    figure = explorer.figure()
    assert "holds scores" in figure.axes[0].get_title()
    assert figure.axes[0].images[0].get_cmap().name == "RdBu_r"
    with pytest.raises(ValueError, match="unknown term 'p2c'"):
        explorer.select(term="p2c")


def test_widgets_live_detection(monkeypatch):
    import IPython

    assert AttentionExplorer(ATTENTIONS, TOKENS).interactive is False  # plain pytest: no kernel
    kernel_shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setattr(IPython, "get_ipython", lambda: kernel_shell)
    assert _figure.widgets_live() is True
    monkeypatch.setenv(_figure.STATIC_ENV_VAR, "1")
    assert _figure.widgets_live() is False


# ---------------------------------------------------------------------------------------------
# Running a (fake) model
# ---------------------------------------------------------------------------------------------


class DotAttentionModel(nn.Module):
    """Two layers x two heads of softmax(x x^T * scale) over token embeddings; padded keys get
    0, like the course models. Records how it was called."""

    def __init__(self, vocab: int = 50) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 8)
        self.dropout = nn.Dropout(0.5)
        self.calls: list[dict] = []

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, output_attentions=False):
        self.calls.append(
            dict(
                training=self.training,
                output_attentions=output_attentions,
                token_type_ids=token_type_ids,
            )
        )
        x = self.embed(input_ids)
        scores = x @ x.transpose(1, 2) / 8**0.5
        if attention_mask is not None:
            scores = scores.masked_fill(~attention_mask[:, None, :].bool(), float("-inf"))
        layers = tuple(
            torch.stack(
                [torch.softmax(scores * (layer + 1) * (head + 1), -1) for head in range(2)], 1
            )
            for layer in range(2)
        )
        return types.SimpleNamespace(attentions=layers if output_attentions else None)


class FakeTokenizer:
    cls_token_id, sep_token_id = 1, 2
    vocab = {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "the": 3, "cat": 4, "sat": 5, "dog": 6}

    def encode(self, text, text_pair=None):
        ids = [1] + [self.vocab[w] for w in text.split()] + [2]
        types_ = [0] * len(ids)
        if text_pair is not None:
            second = [self.vocab[w] for w in text_pair.split()] + [2]
            ids, types_ = ids + second, types_ + [1] * len(second)
        return {"input_ids": ids, "token_type_ids": types_, "attention_mask": [1] * len(ids)}

    def convert_ids_to_tokens(self, ids):
        inverse = {v: k for k, v in self.vocab.items()}
        return [inverse[i] for i in ids]


def test_compute_attentions_drops_padding_and_restores_training_mode():
    torch.manual_seed(0)
    model = DotAttentionModel().train()
    alone = compute_attentions(model, {"input_ids": [1, 3, 4, 2]})
    batch = {
        "input_ids": torch.tensor([[1, 5, 5, 5, 5, 2], [1, 3, 4, 2, 0, 0]]),
        "attention_mask": torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]]),
    }
    padded = compute_attentions(model, batch, FakeTokenizer(), batch_index=1)
    assert padded.tokens == ["[CLS]", "the", "cat", "[SEP]"]
    assert padded.maps["attention"].shape == (2, 2, 4, 4)
    # Same sequence alone or padded in a batch: same attention once the padding is dropped.
    np.testing.assert_allclose(padded.maps["attention"], alone.maps["attention"], atol=1e-6)
    assert alone.tokens == ["1", "3", "4", "2"]  # no tokenizer: ids as text
    assert model.training and all(c["output_attentions"] and not c["training"] for c in model.calls)


def test_show_attention_on_a_sentence_pair():
    model = DotAttentionModel()
    explorer = show_attention(
        model, ("the cat", "sat"), FakeTokenizer(), layer=1, head=1, interactive=False
    )
    assert explorer.tokens == ["[CLS]", "the", "cat", "[SEP]", "sat", "[SEP]"]
    assert explorer.sentence_b_start == 4  # from token_type_ids
    assert (explorer.layer, explorer.head) == (1, 1)
    rows = explorer.maps["attention"][1, 1].sum(-1)
    np.testing.assert_allclose(rows, 1.0, atol=1e-5)
    assert explorer.summary()["sep"] > 0  # two [SEP] tokens found by name


def test_compute_attentions_errors():
    model = DotAttentionModel()
    with pytest.raises(ValueError, match="needs a tokenizer"):
        compute_attentions(model, "the cat")
    with pytest.raises(ValueError, match="batch_index=2 is out of range for 1"):
        compute_attentions(model, [1, 3, 2], batch_index=2)
    with pytest.raises(ValueError, match="3 positions but 2 tokens"):
        compute_attentions(model, [1, 3, 2], tokens=["a", "b"])

    class Silent(nn.Module):
        def forward(self, **_):
            return types.SimpleNamespace(attentions=None)

    with pytest.raises(ValueError, match="Silent returned no attentions"):
        compute_attentions(Silent(), [1, 2])


def test_show_attention_on_a_course_bert():
    bert = pytest.importorskip("course_lib.models.bert")
    from course_lib import BertConfig

    config = BertConfig(
        vocab_size=20,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    model = bert.BertModel(config)
    inputs = {
        "input_ids": torch.tensor([[1, 5, 6, 2, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 0]]),
        "token_type_ids": torch.tensor([[0, 0, 0, 0, 0]]),
    }
    explorer = show_attention(
        model, inputs, tokens=["[CLS]", "a", "b", "[SEP]", "[PAD]"], interactive=False
    )
    assert (explorer.num_layers, explorer.num_heads, explorer.seq_len) == (2, 4, 4)
    assert explorer.tokens == ["[CLS]", "a", "b", "[SEP]"]
    assert len(head_summaries(explorer.maps, explorer.tokens)) == 8


# ---------------------------------------------------------------------------------------------
# bertviz wrappers
# ---------------------------------------------------------------------------------------------


def test_bertviz_head_view_embeds_rounded_attention():
    view = bertviz_head_view(ATTENTIONS, tokens=TOKENS, sentence_b_start=3, layer=1)
    assert "[CLS]" in view.data and "require.min.js" in view.data
    assert "[0.2, 0.2, 0.2, 0.2, 0.2]" in view.data  # the uniform head at 3 decimals
    full = bertviz_head_view(ATTENTIONS, tokens=TOKENS, decimals=None)
    rounded = bertviz_head_view(ATTENTIONS, tokens=TOKENS)
    assert len(rounded.data) < len(full.data)
    with pytest.raises(ValueError, match="layer=0 is not among the layers shown"):
        bertviz_head_view(ATTENTIONS, tokens=TOKENS, layers=[1], layer=0)


def test_bertviz_refuses_long_inputs_and_warns_on_big_output(monkeypatch):
    n = 20
    attention = [torch.softmax(torch.randn(1, 2, n, n), -1) for _ in range(2)]
    tokens = [f"t{i}" for i in range(n)]
    with pytest.raises(ValueError, match=r"20 tokens is more than max_tokens=10.*force=True"):
        bertviz_model_view(attention, tokens=tokens, max_tokens=10)
    view = bertviz_model_view(attention, tokens=tokens, max_tokens=10, force=True)
    estimate = estimate_html_bytes(2, 2, n)
    assert 0.5 * estimate < len(view.data) < 1.5 * estimate + 30_000  # + the fixed JavaScript
    one_layer = bertviz_model_view(attention, tokens=tokens, layers=[0], heads=[1])
    assert len(one_layer.data) < len(view.data)
    monkeypatch.setattr("course_lib.viz.bertviz_view.WARN_BYTES", 1000)
    with pytest.warns(UserWarning, match="MB of HTML"):
        bertviz_head_view(attention, tokens=tokens)


def test_bertviz_runs_a_model_with_a_tokenizer():
    view = bertviz_head_view(DotAttentionModel(), ("the cat", "sat"), FakeTokenizer())
    assert "Sentence A -> Sentence B" in view.data  # sentence_b_start came from token_type_ids
    with pytest.raises(ValueError, match="pass tokens="):
        bertviz_head_view(ATTENTIONS)


def test_deberta_style_terms_default_to_the_probabilities():
    layers = [{"c2c": MAPS[i] - 0.5, "c2p": MAPS[i] * 2 - 1, "probs": MAPS[i]} for i in range(2)]
    explorer = AttentionExplorer(layers, TOKENS, interactive=False)
    assert explorer.terms == ["c2c", "c2p", "probs"] and explorer.term == "probs"
    assert head_summaries(layers, TOKENS) == head_summaries(ATTENTIONS, TOKENS)
    grid = attention_grid(layers, TOKENS)
    np.testing.assert_allclose(grid.axes[0].images[0].get_array(), MAPS[0, 0])
    assert "'probs'" in grid._suptitle.get_text()


class WithTerms(nn.Module):
    """A task model whose backbone offers DeBERTa's attention_terms(...)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = DotAttentionModel()
        self.backbone.attention_terms = self.terms

    def terms(self, input_ids, attention_mask=None, token_type_ids=None):
        probs = self.backbone(input_ids, attention_mask, output_attentions=True).attentions
        return [{"c2c": torch.log(p + 1e-9), "probs": p} for p in probs]


def test_compute_attentions_can_take_the_score_terms():
    model = WithTerms()
    batch = {"input_ids": [[1, 3, 4, 2, 0]], "attention_mask": [[1, 1, 1, 1, 0]]}
    result = compute_attentions(model, batch, terms=True)
    assert list(result.maps) == ["c2c", "probs"]
    assert result.maps["probs"].shape == (2, 2, 4, 4)
    np.testing.assert_allclose(
        result.maps["c2c"], np.log(result.maps["probs"] + 1e-9), rtol=1e-5, atol=1e-5
    )
    plain = DotAttentionModel().train()
    with pytest.raises(ValueError, match="terms=True needs a model with attention_terms"):
        compute_attentions(plain, batch, terms=True)
    assert plain.training  # the error leaves the model as it was


def test_show_attention_with_a_course_tokenizer():
    train = pytest.importorskip("course_lib.tokenization.train")
    bert = pytest.importorskip("course_lib.models.bert")
    from course_lib import BertConfig

    tokenizer = train.train_tokenizer("bert", ["the cat sat", "a dog ran", "the dog sat"] * 4, 60)
    config = BertConfig(
        vocab_size=60,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    explorer = show_attention(bert.BertModel(config), ("the cat sat", "a dog ran"), tokenizer)
    encoded = tokenizer.encode("the cat sat", text_pair="a dog ran")
    assert explorer.tokens == tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    assert explorer.sentence_b_start == encoded["token_type_ids"].index(1)
    assert explorer.tokens[explorer.sentence_b_start - 1] == "[SEP]"


def test_show_attention_on_chapter_05_models():
    """ModernBERT (alternating global / local layers) and ELECTRA render in the explorer; a
    local layer's map is zero outside its window, padding is dropped."""
    from course_lib.config import ElectraConfig, ModernBertConfig
    from course_lib.models import ElectraModel, ModernBertModel

    torch.manual_seed(0)
    inputs = {
        "input_ids": torch.tensor([[1, 5, 6, 7, 8, 9, 10, 11, 2, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 1, 0]]),
    }
    modern = ModernBertModel(
        ModernBertConfig(
            vocab_size=20,
            hidden_size=16,
            intermediate_size=24,
            num_hidden_layers=3,
            num_attention_heads=2,
            global_attn_every_n_layers=2,
            local_attention=4,
            pad_token_id=0,
            max_position_embeddings=32,
        )
    )
    explorer = show_attention(modern, inputs, interactive=False)
    assert (explorer.num_layers, explorer.num_heads, explorer.seq_len) == (3, 2, 9)
    distance = np.abs(np.arange(9)[:, None] - np.arange(9)[None, :])
    local, full = explorer.maps["attention"][1], explorer.maps["attention"][0]
    assert np.all(local[:, distance > 2] == 0) and np.all(local[:, distance <= 2] > 0)
    assert np.all(full > 0) and np.allclose(local.sum(-1), 1, atol=1e-5)
    assert explorer.png()[:4] == b"\x89PNG"

    electra = ElectraModel(
        ElectraConfig(
            vocab_size=20,
            embedding_size=8,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=32,
            max_position_embeddings=16,
        )
    )
    explorer = show_attention(electra, inputs, interactive=False)
    assert (explorer.num_layers, explorer.num_heads, explorer.seq_len) == (2, 4, 9)
    assert np.allclose(explorer.maps["attention"].sum(-1), 1, atol=1e-5)
