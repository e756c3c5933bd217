"""Checkpoints: safetensors + JSON, exact round trips, no pickle, atomic writes, clear errors."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from safetensors import safe_open
from training_helpers import ToyCollator, tiny_mlm, tiny_pretraining, toy_examples

from course_lib.training import Trainer, TrainingConfig, load_checkpoint, load_pretrained
from course_lib.training.checkpoint import (
    MODEL_FILE,
    OPTIMIZER_FILE,
    STATE_FILE,
    get_rng_state,
    read_state,
    save_checkpoint,
    set_rng_state,
)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def trained(tmp_path):
    """A trainer after 3 AdamW steps, so the optimizer has real state, and its checkpoint."""
    trainer = Trainer(
        tiny_mlm(),
        toy_examples(48),
        ToyCollator(),
        TrainingConfig(max_steps=3, batch_size=8, output_dir=str(tmp_path), progress=False),
    )
    trainer.train()
    return trainer, tmp_path / "checkpoint"


def test_checkpoint_is_safetensors_and_plain_json(trained):
    trainer, directory = trained
    assert sorted(p.name for p in directory.iterdir()) == [MODEL_FILE, OPTIMIZER_FILE, STATE_FILE]
    state = json.loads((directory / STATE_FILE).read_text())  # plain JSON, nothing pickled
    assert state["step"] == 3 and state["model_class"] == "BertForMaskedLM"
    assert state["config"]["model_type"] == "bert" and state["config"]["hidden_size"] == 32
    assert state["data"]["examples_seen"] == 24 and state["data"]["epoch"] == 0
    assert state["training_config"]["batch_size"] == 8
    assert {"python", "numpy", "torch"} <= set(state["rng"])
    with safe_open(str(directory / OPTIMIZER_FILE), "pt") as f:
        keys = set(f.keys())
    n_params = len(list(trainer.model.parameters()))
    assert keys == {
        f"state.{i}.{k}" for i in range(n_params) for k in ("step", "exp_avg", "exp_avg_sq")
    }
    for byte_file in (MODEL_FILE, OPTIMIZER_FILE):
        assert b"\x80\x04" not in (directory / byte_file).read_bytes()[:16]  # not a pickle header


def test_model_and_optimizer_round_trip_exactly(trained):
    trainer, directory = trained
    model = tiny_mlm(seed=123)
    optimizer = Trainer(
        model,
        toy_examples(48),
        ToyCollator(),
        TrainingConfig(max_steps=1, batch_size=8, progress=False),
    ).optimizer
    load_checkpoint(directory, model, optimizer)
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(value, model.state_dict()[name]), name
    # The tied decoder is still the embedding matrix after loading (one tensor, not two).
    assert model.mlm_head.decoder.weight is model.backbone.embeddings.word_embeddings.weight
    saved, loaded = trainer.optimizer.state_dict(), optimizer.state_dict()
    assert saved["param_groups"] == loaded["param_groups"]  # betas come back as a tuple
    for index, state in saved["state"].items():
        for key, value in state.items():
            assert (
                torch.equal(value, loaded["state"][index][key])
                and value.dtype == loaded["state"][index][key].dtype
            )


def test_rng_states_round_trip():
    state = get_rng_state()
    json.dumps(state)  # JSON-ready
    expected = (random.random(), np.random.rand(), torch.rand(3))
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    set_rng_state(state)
    again = (random.random(), np.random.rand(), torch.rand(3))
    assert (
        expected[0] == again[0] and expected[1] == again[1] and torch.equal(expected[2], again[2])
    )


def test_load_pretrained_rebuilds_the_model_from_class_and_config(trained):
    trainer, directory = trained
    model = load_pretrained(directory)
    assert type(model).__name__ == "BertForMaskedLM" and not model.training
    assert model.config == trainer.model.config
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(value, model.state_dict()[name]), name


def test_a_checkpoint_of_another_architecture_is_refused_by_name(trained):
    _, directory = trained
    with pytest.raises(ValueError, match="different config.*hidden_size: 32 vs 48"):
        load_checkpoint(directory, tiny_mlm(hidden_size=48, num_attention_heads=2))
    with pytest.raises(ValueError, match="does not match BertForPreTraining"):
        load_checkpoint(directory, tiny_pretraining())


def test_a_directory_without_state_is_not_a_checkpoint(tmp_path):
    with pytest.raises(
        FileNotFoundError, match="is not a checkpoint: trainer_state.json is missing"
    ):
        read_state(tmp_path)


def test_a_failed_save_keeps_the_previous_checkpoint(tmp_path):
    model = tiny_mlm()
    directory = save_checkpoint(tmp_path / "ckpt", model, state={"step": 1})

    class Broken:
        def save(self, path):
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(directory, model, state={"step": 2}, tokenizer=Broken())
    assert read_state(directory)["step"] == 1
    load_checkpoint(directory, tiny_mlm(seed=3))  # still complete and loadable


def test_classifier_saved_under_its_old_name_loads_and_a_bert_nsp_head_keeps_its_name(tmp_path):
    """Checkpoints from before `classifier.classifier` became `classifier.out_proj` still load
    (load_pretrained and load_checkpoint); BERT's `nsp_head` is not taken for ALBERT's old name."""
    from safetensors.torch import load_file, save_file
    from training_helpers import tiny_config

    from course_lib.models import BertForSequenceClassification
    from course_lib.training.checkpoint import migrate_keys

    torch.manual_seed(0)
    saved = BertForSequenceClassification(tiny_config(num_labels=3))
    save_checkpoint(tmp_path / "ckpt", saved)
    weights = tmp_path / "ckpt" / MODEL_FILE
    old = {k.replace(".out_proj.", ".classifier."): v for k, v in load_file(str(weights)).items()}
    assert "classifier.classifier.weight" in old
    save_file(old, str(weights))
    loaded = load_pretrained(tmp_path / "ckpt")
    for (name, a), b in zip(saved.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), name
    bert_names = set(tiny_pretraining().state_dict())
    assert migrate_keys(["nsp_head.classifier.weight"], bert_names) == {}


def test_distilbert_classifier_saved_with_pre_classifier_loads_into_the_shared_head(tmp_path):
    """DistilBERT's classification head was its own class with `pre_classifier`; it is now the
    shared first-token head (`dense`): an old checkpoint loads and predicts the same."""
    from safetensors.torch import load_file, save_file
    from training_helpers import tiny_config

    from course_lib.config import DistilBertConfig
    from course_lib.models import DistilBertForSequenceClassification

    # the shared tiny BERT sizes, as DistilBERT (no segment embeddings)
    sizes = {
        **tiny_config(num_labels=3).to_dict(),
        "model_type": "distilbert",
        "type_vocab_size": 0,
    }
    config = DistilBertConfig.from_dict(sizes)
    torch.manual_seed(0)
    saved = DistilBertForSequenceClassification(config).eval()
    save_checkpoint(tmp_path / "ckpt", saved)
    weights = tmp_path / "ckpt" / MODEL_FILE
    old = {
        k.replace("classifier.dense.", "classifier.pre_classifier."): v
        for k, v in load_file(str(weights)).items()
    }
    assert "classifier.pre_classifier.weight" in old and "classifier.dense.weight" not in old
    save_file(old, str(weights))
    loaded = load_pretrained(tmp_path / "ckpt").eval()
    ids = torch.randint(5, config.vocab_size, (2, 7))
    torch.testing.assert_close(loaded(ids).logits, saved(ids).logits, rtol=0, atol=0)
