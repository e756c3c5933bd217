"""Real checkpoints: the code path that loads a released model from a local folder, converts it
and compares it, run on randomly initialised transformers models saved with save_pretrained (never
the hub); offline, one line and None."""

from __future__ import annotations

import pytest
import torch
import transformers

from course_lib.data import load_builtin_corpus
from course_lib.interop.real_weights import (
    CHECKPOINTS,
    detect_replaced,
    fill_mask,
    load_real_model,
    show_real_model,
)
from course_lib.tokenization import train_tokenizer


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return list(load_builtin_corpus().texts("train"))[:200]


def _save(tmp_path, family: str, texts: list[str], hf_class: str, config_class: str, **sizes):
    tokenizer = train_tokenizer(family, texts, vocab_size=400)
    folder = tmp_path / family
    tokenizer.to_transformers().save_pretrained(folder)
    config = getattr(transformers, config_class)(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, **sizes,
    )  # fmt: skip
    torch.manual_seed(0)
    hf = getattr(transformers, hf_class)(config).eval()
    hf.save_pretrained(folder)
    return folder, hf


def test_every_family_names_a_released_checkpoint_the_course_can_convert():
    from course_lib.interop import CONVERSIONS

    known = {c.hf_class_name for c in CONVERSIONS.values()}
    assert {name for _, name, _ in CHECKPOINTS.values()} <= known


def test_a_saved_bert_loads_converts_and_fills_masks_like_transformers(tmp_path, texts):
    folder, hf = _save(tmp_path, "bert", texts, "BertForMaskedLM", "BertConfig")
    real = load_real_model("bert", source=folder)
    assert real is not None and real.max_diff < 1e-5
    assert type(real.model).__name__ == "BertForMaskedLM"
    text = "the [MASK] of the module"
    top = fill_mask(real, text, top_k=5)
    inputs = real.encode(text)
    where = int((inputs["input_ids"][0] == real.tokenizer.mask_token_id).nonzero())
    with torch.no_grad():
        probs = hf(**inputs).logits[0, where].softmax(-1)
    expected = real.tokenizer.convert_ids_to_tokens(probs.topk(5).indices.tolist())
    assert [w for w, _ in top] == expected
    assert [p for _, p in top] == pytest.approx(probs.topk(5).values.tolist(), abs=1e-5)
    assert real.tokens(text)[0] == "[CLS]" and real.tokens(text)[-1] == "[SEP]"
    with pytest.raises(ValueError, match=r"exactly one \[MASK\] in the text; found 2"):
        fill_mask(real, "[MASK] and [MASK]")


def test_a_saved_electra_detects_replaced_tokens_and_refuses_fill_mask(tmp_path, texts):
    folder, hf = _save(
        tmp_path, "bert", texts, "ElectraForPreTraining", "ElectraConfig", embedding_size=16
    )
    real = load_real_model("electra", source=folder)
    assert real is not None and real.max_diff < 1e-5
    scores = detect_replaced(real, "the function returns a list")
    with torch.no_grad():
        expected = hf(**real.encode("the function returns a list")).logits[0].sigmoid()
    assert [p for _, p in scores] == pytest.approx(expected.tolist(), abs=1e-6)
    with pytest.raises(ValueError, match="replaced-token detection: it has no MLM head"):
        fill_mask(real, "the [MASK] returns")


def test_offline_without_weights_prints_one_line_and_returns_none(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert load_real_model("albert") is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith(
        "skipped: albert-base-v2 is not in this machine's Hugging Face cache"
    )
    assert "download=True" in out
    assert load_real_model("bert", source=tmp_path / "no-such-folder") is None
    assert capsys.readouterr().out.startswith(f"skipped: no folder at {tmp_path}")
    (tmp_path / "notes").mkdir()
    assert load_real_model("bert", source=tmp_path / "notes") is None
    assert "holds no BertForMaskedLM checkpoint" in capsys.readouterr().out


def test_unknown_family_names_the_known_ones():
    with pytest.raises(ValueError, match="no real checkpoint for 'gpt2'.*roberta"):
        load_real_model("gpt2")


def test_show_real_model_prints_predictions_and_draws_three_layers(tmp_path, texts, capsys):
    folder, _ = _save(tmp_path, "bert", texts, "BertForMaskedLM", "BertConfig")
    real = load_real_model("bert", source=folder)
    fig = show_real_model(real, ["the [MASK] of the module", "a [MASK] list"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(f"within {real.max_diff:.1e}") and len(out) == 5
    assert out[2].count(",") == 4  # five candidates
    assert len(fig.axes) == 4  # layers {0, 1, 1} = 2 layers x 2 heads


def test_a_missing_package_is_one_line_that_names_it(monkeypatch, capsys):
    def needs_sentencepiece(*args, **kwargs):
        raise ImportError("DebertaV2Tokenizer requires SentencePiece", name="sentencepiece")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", needs_sentencepiece)
    assert load_real_model("deberta") is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "pip install sentencepiece" in out
