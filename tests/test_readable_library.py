"""The library reads like the paper (issue #36): one BERT masked-LM forward, traced at run time,
enters few functions in few files; one BERT layer is read in one file; BERT's parts carry no
hook that exists for a single family; each variant changes BERT's parts in its own file.

Before issue #36 the traced `BertForMaskedLM` forward entered 18 functions in 7 files (20 code
objects counting two comprehensions) and DeBERTa's masked LM 25 in 10 files.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest
import torch

import course_lib
from course_lib.config import BertConfig, DebertaConfig
from course_lib.models import MODEL_CLASSES, BertForMaskedLM, DebertaForMaskedLM
from course_lib.models import bert as bert_module
from course_lib.models.bert import (
    BertModel,
    Encoder,
    EncoderLayer,
    MultiHeadSelfAttention,
    TaskModel,
)
from course_lib.models.deberta import DisentangledSelfAttention
from course_lib.models.modernbert import ModernBertEncoder

LIB = Path(course_lib.__file__).resolve().parent
SIZES = dict(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=40,
)


def traced(fn, *args, **kwargs) -> list[tuple[str, str]]:
    """Every course_lib function (code object: methods, functions, comprehensions) that calling
    `fn(*args, **kwargs)` enters, as (file relative to course_lib, qualified name), in order."""
    seen: list[tuple[str, str]] = []

    def profile(frame, event, arg):
        if event == "call":
            path = Path(frame.f_code.co_filename)
            if path.is_relative_to(LIB):
                key = (path.relative_to(LIB).as_posix(), frame.f_code.co_qualname)
                if key not in seen:
                    seen.append(key)

    sys.setprofile(profile)
    try:
        fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return seen


def padded_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """input_ids (2, 9) with the second row padded after 6 tokens, and two masked labels."""
    torch.manual_seed(0)
    input_ids = torch.randint(5, 97, (2, 9))
    attention_mask = torch.ones(2, 9, dtype=torch.long)
    attention_mask[1, 6:] = 0
    input_ids[1, 6:] = 0
    labels = torch.full((2, 9), -100)
    labels[0, 1], labels[1, 2] = 5, 6
    return input_ids, attention_mask, labels


def test_bert_masked_lm_forward_enters_at_most_12_functions_in_2_files():
    input_ids, attention_mask, labels = padded_batch()
    model = BertForMaskedLM(BertConfig(**SIZES))
    functions = traced(model, input_ids, attention_mask, labels=labels)
    files = {path for path, _ in functions}
    names = [name for _, name in functions]
    # The tracer sees the whole path, from the task's forward to the loss.
    assert names[0] == "BertForMaskedLM.forward"
    for part in ("MultiHeadSelfAttention.forward", "FeedForward.forward", "masked_lm_loss"):
        assert part in names, names
    assert files <= {"models/bert.py", "models/inputs.py"}, functions
    assert len(functions) <= 12, functions


@pytest.mark.parametrize("use_emd", [False, True])
def test_deberta_masked_lm_forward_enters_at_most_4_files(use_emd):
    input_ids, attention_mask, labels = padded_batch()
    config = DebertaConfig(**SIZES, position_buckets=8, use_emd=use_emd)
    functions = traced(DebertaForMaskedLM(config), input_ids, attention_mask, labels=labels)
    files = {path for path, _ in functions}
    assert ("models/deberta.py", "DisentangledSelfAttention.scores") in functions
    # BERT's attention forward does the head split and merge; DeBERTa only scores.
    assert ("models/bert.py", "MultiHeadSelfAttention.forward") in functions
    assert len(files) <= 4, sorted(files)


def test_one_bert_layer_is_read_in_models_bert_py():
    layer = EncoderLayer(BertConfig(**SIZES)).eval()
    keep_mask = torch.ones(2, 1, 1, 9, dtype=torch.bool)
    keep_mask[1, ..., 6:] = False
    for pre_layer_norm in (False, True):
        layer.pre_layer_norm = pre_layer_norm
        for output_attentions in (False, True):
            functions = traced(layer, torch.randn(2, 9, 32), keep_mask, output_attentions)
            assert {path for path, _ in functions} == {"models/bert.py"}, functions
            assert functions[0] == ("models/bert.py", "EncoderLayer.forward")


FAMILY_HOOKS = (
    "layer_inputs",  # DeBERTa's and ModernBERT's per-forward inputs, now their own forward
    "layer_outputs",  # ModernBERT's unpacking, now in its own encoder loop
    "final_norm_in_hidden_states",  # ModernBERT's reporting, now in its own encoder loop
    "build_final_norm",
    "head_inputs",  # what a task's head needed besides the output: now named in its forward
    "add_predictions",
    "add_masked_lm_predictions",
    "add_heads",
    "position_biased_input",  # DeBERTa's switch, now in DeBERTa's embeddings
)


@pytest.mark.parametrize(
    "cls",
    [Encoder, EncoderLayer, MultiHeadSelfAttention, bert_module.BertEmbeddings, BertModel]
    + [
        cls
        for cls in vars(bert_module).values()
        if isinstance(cls, type)
        and cls.__module__ == bert_module.__name__
        and issubclass(cls, TaskModel)
    ],
)
def test_berts_parts_have_no_hook_for_a_single_family(cls):
    present = [name for name in FAMILY_HOOKS if hasattr(cls, name)]
    assert not present, f"{cls.__name__} has {present}"


def test_every_task_forward_names_its_targets():
    """No **targets: a task's signature is the whole truth about what it takes."""
    tasks = [cls for cls in MODEL_CLASSES.values() if issubclass(cls, TaskModel)]
    assert len(tasks) >= 25
    for cls in tasks:
        parameters = inspect.signature(cls.forward).parameters
        assert not any(p.kind is p.VAR_KEYWORD for p in parameters.values()), cls.__name__
    assert (
        "next_sentence_label"
        in inspect.signature(MODEL_CLASSES["BertForPreTraining"].forward).parameters
    )
    albert = inspect.signature(MODEL_CLASSES["AlbertForPreTraining"].forward).parameters
    assert "sentence_order_label" in albert
    for name in ("BertForQuestionAnswering", "DebertaForQuestionAnswering"):
        qa = inspect.signature(MODEL_CLASSES[name].forward).parameters
        assert {"start_positions", "end_positions"} <= set(qa), name


def test_each_variant_names_its_parts_in_its_own_class_body():
    """No Variant mixins: a variant's task class says which backbone it runs on in its body, so
    no method resolution order has to be followed to find it."""
    for name, cls in MODEL_CLASSES.items():
        assert not any(base.__name__.endswith("Variant") for base in cls.__mro__), name
        if issubclass(cls, TaskModel) and cls.__module__ != bert_module.__name__:
            assert "base_model_class" in vars(cls), name
            assert "config_class" in vars(cls), name


def test_deberta_overrides_only_how_attention_scores_are_computed():
    own = set(vars(DisentangledSelfAttention))
    assert "scores" in own
    assert "forward" not in own and "split_heads" not in own  # BERT's split, softmax and merge


def test_modernbert_owns_its_encoder_loop():
    assert not issubclass(ModernBertEncoder, Encoder)
    assert "forward" in vars(ModernBertEncoder)
