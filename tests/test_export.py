"""`course export` / `course import`: a course checkpoint goes to transformers and back, exactly.

For every family and both LayerNorm placements with an exact transformers equivalent, a tiny
model with every weight randomised (so a swapped LayerNorm or a shifted position row shows) is
saved as a course checkpoint, exported, loaded by `transformers.pipeline("fill-mask")` from the
folder alone, and its predictions compared with `course fill-mask`; importing the folder back
must give the same weights bit for bit. Only local folders: nothing comes from the Hub.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from course_lib.config import BertConfig
from course_lib.interop.export import export_checkpoint, import_transformers
from course_lib.models import (
    MODEL_CLASSES,
    AlbertConfig,
    DebertaConfig,
    DistilBertConfig,
    RobertaConfig,
)
from course_lib.tokenization import CourseTokenizer, train_tokenizer
from course_lib.training.checkpoint import load_pretrained, save_checkpoint
from course_lib.training.cli import main
from course_lib.training.inference import fill_mask

pytestmark = pytest.mark.usefixtures("one_thread")
transformers = pytest.importorskip("transformers")

WORDS = (
    "the cat sat on the mat . a dog ran to the park and the bird sang in the tree . "
    "the model reads a sentence and predicts the hidden word from its context . "
    "python code raises an exception when the file is missing . "
)
TEXTS = [WORDS * 3, "the statement is here . the value of the list is returned ."] * 5
SIZES = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=40,
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
)
# family -> (config class, masked-LM class, extra config, tokenizer family, vocabulary size)
FAMILIES = {
    "bert": (BertConfig, "BertForMaskedLM", {}, "wordpiece", 120),
    "roberta": (RobertaConfig, "RobertaForMaskedLM", {}, "bpe", 300),
    "albert": (AlbertConfig, "AlbertForMaskedLM", {"embedding_size": 16}, "unigram", 120),
    "deberta": (DebertaConfig, "DebertaForMaskedLM", {"position_buckets": 8}, "unigram", 120),
    "distilbert": (DistilBertConfig, "DistilBertForMaskedLM", {}, "wordpiece", 120),
}
EXPORTABLE = [
    ("bert", False),
    ("bert", True),
    ("roberta", False),
    ("roberta", True),
    ("albert", False),
    ("deberta", False),
    ("distilbert", False),
    ("distilbert", True),
]
TOLERANCE = 1e-5
RUN = {"family": "any", "preset": "tiny", "corpus": "builtin", "max_length": 32}
_TOKENIZERS: dict[str, CourseTokenizer] = {}


def tokenizer_for(family: str) -> CourseTokenizer:
    _, _, _, kind, vocab = FAMILIES[family]
    if kind not in _TOKENIZERS:
        _TOKENIZERS[kind] = train_tokenizer(kind, TEXTS, vocab_size=vocab)
    return _TOKENIZERS[kind]


def randomise(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Move every weight off its initial value (LayerNorms of 1 and 0 would hide a swap)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.3)
    return model.eval()


def make_checkpoint(
    tmp_path: Path, family: str, pre_ln: bool, class_name: str | None = None, **changes
) -> tuple[Path, torch.nn.Module, CourseTokenizer]:
    config_cls, mlm_class, extra, _, _ = FAMILIES[family]
    tokenizer = tokenizer_for(family)
    sizes = dict(SIZES, **extra, pre_layer_norm=pre_ln, **changes)
    sizes.update(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = randomise(MODEL_CLASSES[class_name or mlm_class](config_cls(**sizes)), seed=1)
    path = save_checkpoint(
        tmp_path / f"{family}-ckpt", model, state={"step": 3, "run": RUN}, tokenizer=tokenizer
    )
    return path, model, tokenizer


def sentences(tokenizer: CourseTokenizer) -> list[str]:
    mask = tokenizer.mask_token
    return [
        f"the cat sat on the {mask} .",
        f"python code raises an {mask} when the file is missing .",
    ]


def compare_with_pipeline(folder: Path, model: torch.nn.Module, tokenizer: CourseTokenizer) -> None:
    """transformers' fill-mask pipeline, from the folder alone, against course fill-mask.

    The pipeline's softmax runs over the whole vocabulary; course fill-mask never proposes a
    special token and renormalises over the rest. So: (1) the pipeline's full distribution equals
    our model's softmax; (2) renormalised over non-special tokens, it gives course fill-mask's
    top-k tokens and probabilities.
    """
    pipe = transformers.pipeline(
        "fill-mask", model=str(folder), tokenizer=str(folder), device="cpu"
    )
    vocab = tokenizer.vocab_size
    special = set(tokenizer.special_ids)
    for text in sentences(tokenizer):
        hf_ids = pipe.tokenizer(text)["input_ids"]
        assert hf_ids == tokenizer.encode(text)["input_ids"], (text, hf_ids)
        full = pipe(text, top_k=vocab)
        assert len(full) == vocab
        hf_probs = torch.zeros(vocab, dtype=torch.float64)
        for row in full:
            hf_probs[row["token"]] = row["score"]
        with torch.no_grad():
            encoded = tokenizer.encode(text)
            out = model(
                input_ids=torch.tensor([encoded["input_ids"]]),
                attention_mask=torch.tensor([encoded["attention_mask"]]),
                token_type_ids=torch.tensor([encoded["token_type_ids"]]),
            )
        position = encoded["input_ids"].index(tokenizer.mask_token_id)
        ours = out.mlm_logits[0, position].double().softmax(-1)
        assert (ours - hf_probs).abs().max() <= TOLERANCE
        ordinary = hf_probs.clone()
        ordinary[sorted(special)] = 0.0
        ordinary /= ordinary.sum()
        top = fill_mask(model, tokenizer, text, top_k=5)
        for candidate in top:
            assert abs(ordinary[candidate["token"]] - candidate["score"]) <= TOLERANCE
            hf_row = next(r for r in full if r["token"] == candidate["token"])
            assert hf_row["token_str"].strip() == candidate["token_str"]
        # course's top-k is a top-k of the pipeline's (ties within the tolerance may swap)
        rest = ordinary.clone()
        rest[[c["token"] for c in top]] = 0.0
        assert rest.max() <= top[-1]["score"] + TOLERANCE


@pytest.mark.parametrize(("family", "pre_ln"), EXPORTABLE)
def test_export_matches_pipeline_and_imports_back_exactly(tmp_path, family, pre_ln):
    checkpoint, model, tokenizer = make_checkpoint(tmp_path, family, pre_ln)
    result = export_checkpoint(checkpoint, tmp_path / "hf")
    expected = "RobertaPreLayerNorm" if pre_ln else {"deberta": "DebertaV2"}.get(family, "")
    assert result.hf_class.startswith(expected)
    assert result.max_difference <= TOLERANCE
    files = {p.name for p in (tmp_path / "hf").iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= files
    compare_with_pipeline(tmp_path / "hf", model, tokenizer)

    out, imported, _ = import_transformers(tmp_path / "hf", tmp_path / "back")
    reloaded = load_pretrained(out)
    assert type(reloaded) is type(model) and reloaded.config == model.config
    original, back = model.state_dict(), reloaded.state_dict()
    assert set(original) == set(back)
    for key, value in original.items():
        assert torch.equal(value, back[key]), key
    assert CourseTokenizer.load(out).get_vocab() == tokenizer.get_vocab()
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["run"] == RUN and state["step"] == 3  # course evaluate measures as before


def assert_same_weights(model: torch.nn.Module, reloaded: torch.nn.Module) -> None:
    original, back = model.state_dict(), reloaded.state_dict()
    assert set(original) == set(back)
    for key, value in original.items():
        assert torch.equal(value, back[key]), key


def test_modernbert_export_matches_pipeline_and_imports_back_exactly(tmp_path):
    """ModernBERT (local and global layers, rotary positions, GeGLU) as course pretrain trains
    it: transformers' fill-mask pipeline from the folder agrees with course fill-mask."""
    from course_lib.config.modernbert import ModernBertConfig

    tokenizer = tokenizer_for("roberta")  # byte-level BPE, ModernBERT's tokenizer kind
    config = ModernBertConfig(
        vocab_size=tokenizer.vocab_size,
        pad_token_id=tokenizer.pad_token_id,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=48,
        max_position_embeddings=40,
        global_attn_every_n_layers=2,  # layers 0 and 2 global, layer 1 local
        local_attention=4,
    )
    torch.manual_seed(0)
    model = randomise(MODEL_CLASSES["ModernBertForMaskedLM"](config), seed=1)
    checkpoint = save_checkpoint(
        tmp_path / "ckpt", model, state={"step": 3, "run": RUN}, tokenizer=tokenizer
    )
    result = export_checkpoint(checkpoint, tmp_path / "hf")
    assert result.hf_class == "ModernBertForMaskedLM" and result.max_difference <= TOLERANCE
    compare_with_pipeline(tmp_path / "hf", model, tokenizer)

    out, _, _ = import_transformers(tmp_path / "hf", tmp_path / "back")
    reloaded = load_pretrained(out)
    assert type(reloaded) is type(model) and reloaded.config == model.config
    assert_same_weights(model, reloaded)


def test_electra_exports_its_discriminator_and_transformers_gives_the_same_logits(tmp_path):
    """An ELECTRA run (generator + discriminator) exports the discriminator as transformers'
    ElectraForPreTraining: from the folder alone, tokenizer and model give our logits (1e-5);
    importing it back gives the discriminator bit for bit."""
    from course_lib.config.electra import ElectraConfig
    from course_lib.objectives.rtd import ElectraPretrainer

    tokenizer = tokenizer_for("bert")
    sizes = dict(SIZES, embedding_size=16, pre_layer_norm=False)
    config = ElectraConfig(**sizes, vocab_size=tokenizer.vocab_size, pad_token_id=0)
    torch.manual_seed(0)
    model = randomise(ElectraPretrainer.from_config(config, 0.5), seed=1)
    checkpoint = save_checkpoint(
        tmp_path / "ckpt", model, state={"step": 3, "run": RUN}, tokenizer=tokenizer
    )
    result = export_checkpoint(checkpoint, tmp_path / "hf")
    assert result.hf_class == "ElectraForPreTraining" and "generator" in result.note
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    hf_model = transformers.ElectraForPreTraining.from_pretrained(str(tmp_path / "hf")).eval()
    for text in sentences(tokenizer) + ["the dog sat on the tree ."]:
        encoded = tokenizer.encode(text)
        hf_inputs = hf_tokenizer(text, return_tensors="pt")
        assert hf_inputs["input_ids"][0].tolist() == encoded["input_ids"]
        with torch.no_grad():
            theirs = hf_model(**hf_inputs).logits
            ours = model.discriminator(
                **{k: torch.tensor([encoded[k]]) for k in ("input_ids", "attention_mask")}
            ).logits
        assert (ours - theirs).abs().max() <= TOLERANCE

    out, _, note = import_transformers(tmp_path / "hf", tmp_path / "back")
    assert "course detect" in note
    reloaded = load_pretrained(out)
    assert type(reloaded).__name__ == "ElectraForPreTraining"
    assert reloaded.config == model.discriminator.config
    assert_same_weights(model.discriminator, reloaded)
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["training_config"]["objective"] == "rtd"


def test_pre_ln_bert_positions_move_to_the_padding_offset(tmp_path):
    """RobertaPreLayerNorm numbers tokens from pad + 1: row pad + 1 + i holds our row i."""
    checkpoint, model, tokenizer = make_checkpoint(tmp_path, "bert", True)
    export_checkpoint(checkpoint, tmp_path / "hf")
    hf = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "hf", local_files_only=True)
    table = hf.roberta_prelayernorm.embeddings.position_embeddings.weight
    ours = model.backbone.embeddings.position_embeddings.weight
    shift = tokenizer.pad_token_id + 1
    assert hf.config.max_position_embeddings == model.config.max_position_embeddings + shift
    assert torch.equal(table[shift:], ours) and not table[:shift].any()
    # The final LayerNorm after the last layer is ours: changing it changes both models alike.
    assert torch.equal(
        hf.roberta_prelayernorm.LayerNorm.weight, model.backbone.encoder.final_norm.weight
    )


def test_pretraining_model_exports_its_mlm_part_only_when_asked(tmp_path):
    checkpoint, model, tokenizer = make_checkpoint(tmp_path, "bert", True, "BertForPreTraining")
    with pytest.raises(ValueError, match="no NSP head; pass --mlm-only"):
        export_checkpoint(checkpoint, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()
    result = export_checkpoint(checkpoint, tmp_path / "hf", mlm_only=True)
    assert result.course_class == "BertForMaskedLM" and "NSP head" in result.note
    mlm = MODEL_CLASSES["BertForMaskedLM"](model.config)
    mlm.load_state_dict({k: v for k, v in model.state_dict().items() if k in mlm.state_dict()})
    compare_with_pipeline(tmp_path / "hf", mlm.eval(), tokenizer)


def test_post_ln_pretraining_model_keeps_its_sentence_head(tmp_path):
    checkpoint, model, tokenizer = make_checkpoint(
        tmp_path, "albert", False, "AlbertForPreTraining"
    )
    assert export_checkpoint(checkpoint, tmp_path / "hf").hf_class == "AlbertForPreTraining"
    out, _, _ = import_transformers(tmp_path / "hf", tmp_path / "back")
    back = load_pretrained(out).state_dict()
    assert all(torch.equal(v, back[k]) for k, v in model.state_dict().items())
    assert (
        json.loads((out / "trainer_state.json").read_text())["training_config"]["objective"]
        == "mlm+sop"
    )


@pytest.mark.parametrize(
    ("family", "why"),
    [
        ("albert", "transformers has no pre-LN albert: its albert class is post-LN"),
        ("deberta", "no disentangled (relative-position) attention"),
    ],
)
def test_models_without_an_exact_equivalent_are_refused_in_one_line(tmp_path, capsys, family, why):
    checkpoint, _, _ = make_checkpoint(tmp_path, family, True)
    assert main(["export", str(checkpoint), str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and why in err and err.startswith("course export: error:")
    assert not (tmp_path / "hf").exists()


def test_export_never_writes_into_a_non_empty_folder(tmp_path, capsys):
    checkpoint, _, _ = make_checkpoint(tmp_path, "bert", False)
    target = tmp_path / "hf"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    assert main(["export", str(checkpoint), str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not empty" in err
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    assert main(["import", str(checkpoint), str(tmp_path / "x")]) == 2  # not a transformers folder
    assert "no config.json" in capsys.readouterr().err


def test_cli_round_trip_and_fill_mask_on_an_imported_transformers_model(tmp_path, capsys):
    """A learner's transformers folder (here a random one made by transformers itself, as
    bert-base-uncased would be on disk) used with course fill-mask after course import."""
    tokenizer = tokenizer_for("bert")
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=40,
    )
    torch.manual_seed(0)
    hf = transformers.BertForMaskedLM(config).eval()
    randomise(hf, seed=2)
    folder = tmp_path / "bert-base-uncased"
    hf.save_pretrained(folder)
    tokenizer.to_transformers().save_pretrained(folder)

    assert main(["import", str(folder), str(tmp_path / "course")]) == 0
    text = sentences(tokenizer)[0]
    capsys.readouterr()
    assert main(["fill-mask", str(tmp_path / "course"), text, "--top-k", "3"]) == 0
    printed = capsys.readouterr().out
    model = load_pretrained(tmp_path / "course")
    top = fill_mask(model, tokenizer, text, top_k=3)
    assert [c["token_str"] for c in top] == [line.split()[1] for line in printed.splitlines()]
    compare_with_pipeline(folder, model, tokenizer)
    # and out again through the CLI: the same transformers weights
    assert main(["export", str(tmp_path / "course"), str(tmp_path / "again")]) == 0
    again = transformers.AutoModelForMaskedLM.from_pretrained(
        tmp_path / "again", local_files_only=True
    )
    ref = hf.state_dict()
    assert all(torch.equal(v, ref[k]) for k, v in again.state_dict().items())


def test_import_refuses_a_folder_whose_weights_lack_part_of_the_model(tmp_path, capsys):
    """A backbone-only folder labelled as a masked-LM would get a random head: refused."""
    tokenizer = tokenizer_for("bert")
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=40,
    )
    folder = tmp_path / "backbone"
    transformers.BertModel(config).save_pretrained(folder)
    tokenizer.to_transformers().save_pretrained(folder)
    saved = json.loads((folder / "config.json").read_text())
    saved["architectures"] = ["BertForMaskedLM"]
    (folder / "config.json").write_text(json.dumps(saved))
    capsys.readouterr()  # transformers' own progress bars while the folder was made
    assert main(["import", str(folder), str(tmp_path / "course")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "weights of BertForMaskedLM" in err and "random" in err
    assert not (tmp_path / "course").exists()


def test_a_roberta_prelayernorm_folder_without_course_metadata_imports_as_pre_ln_roberta(tmp_path):
    """A RobertaPreLayerNorm model from elsewhere (no "course_lib" entry in config.json)."""
    tokenizer = tokenizer_for("roberta")
    config = transformers.RobertaPreLayerNormConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=42,
        type_vocab_size=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    hf = randomise(transformers.RobertaPreLayerNormForMaskedLM(config), seed=3)
    folder = tmp_path / "efficient-mlm"
    hf.save_pretrained(folder)
    tokenizer.to_transformers().save_pretrained(folder)
    assert "course_lib" not in json.loads((folder / "config.json").read_text())
    out, model, _ = import_transformers(folder, tmp_path / "course")
    assert type(model).__name__ == "RobertaForMaskedLM" and model.config.pre_layer_norm
    compare_with_pipeline(folder, load_pretrained(out), tokenizer)


def test_the_readme_flow_course_pretrain_then_export(tmp_path, capsys):
    """The issue's case: `course pretrain` trains a pre-LN tiny BERT; `course export` makes it a
    transformers model whose pipeline agrees with `course fill-mask`, and it imports back."""
    import random

    rng = random.Random(0)
    words = WORDS.split()
    docs = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(30)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(docs) + "\n")
    run = tmp_path / "run"
    flags = ["--steps", "2", "--samples", "0", "--batch-size", "4", "--no-progress"]
    assert main(["pretrain", "--corpus", str(corpus), "--output-dir", str(run), *flags]) == 0
    checkpoint = run / "checkpoint"
    model, tokenizer = load_pretrained(checkpoint), CourseTokenizer.load(checkpoint)
    assert model.config.pre_layer_norm  # the tiny recipe's placement
    capsys.readouterr()
    assert main(["export", str(checkpoint), str(tmp_path / "hf")]) == 0
    assert (
        "BertForMaskedLM -> transformers RobertaPreLayerNormForMaskedLM" in capsys.readouterr().out
    )
    compare_with_pipeline(tmp_path / "hf", model, tokenizer)
    assert main(["import", str(tmp_path / "hf"), str(tmp_path / "back")]) == 0
    back = load_pretrained(tmp_path / "back").state_dict()
    assert all(torch.equal(v, back[k]) for k, v in model.state_dict().items())
