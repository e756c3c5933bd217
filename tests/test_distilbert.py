"""DistilBERT: parity with transformers' DistilBERT, exact counts, and a student built from a teacher.

Random-init transformers models from small configs (never downloaded), padded batches with odd
lengths; every output within 1e-5; state dicts round-trip exactly.
"""

import pytest
import torch
import transformers
from parity import (
    assert_losses_equal,
    assert_outputs_equal,
    assert_state_dicts_equal,
    max_diff,
    perturb_biases_and_norms,
)

import course_lib.interop.distilbert  # noqa: F401  (registers the DistilBERT conversions)
from course_lib.config import BertConfig
from course_lib.counting import COMPONENTS, count_parameters
from course_lib.interop.core import from_transformers, to_transformers
from course_lib.models import distilbert as dis
from course_lib.models.bert import BertForMaskedLM, BertForPreTraining, BertModel
from course_lib.models.distilbert import DistilBertConfig, DistilBertForMaskedLM, DistilBertModel
from course_lib.objectives.distillation import default_student_layers, init_student_from_teacher

CLASSES = [
    "DistilBertModel",
    "DistilBertForMaskedLM",
    "DistilBertForSequenceClassification",
    "DistilBertForTokenClassification",
    "DistilBertForQuestionAnswering",
]
CONFIGS = {
    # name: (dim, heads, layers, hidden_dim, activation) -- head sizes 12 and 8
    "d48-heads4-relu": (48, 4, 2, 37, "relu"),
    "d40-heads5-gelu": (40, 5, 3, 64, "gelu"),
}
VOCAB, SEQ = 211, 13
TOL = 1e-5


def hf_model(cls_name: str, dims, num_labels: int = 3):
    dim, heads, layers, hidden_dim, act = dims
    config = transformers.DistilBertConfig(
        vocab_size=VOCAB,
        dim=dim,
        n_heads=heads,
        n_layers=layers,
        hidden_dim=hidden_dim,
        activation=act,
        max_position_embeddings=40,
        num_labels=2 if cls_name.endswith("QuestionAnswering") else num_labels,
        attn_implementation="eager",
    )
    torch.manual_seed(len(cls_name))
    return perturb_biases_and_norms(getattr(transformers, cls_name)(config).eval())


def padded_batch(seq: int = SEQ):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, VOCAB, (3, seq), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    return dict(input_ids=ids, attention_mask=mask)


def small_config(**changes) -> DistilBertConfig:
    sizes = dict(
        vocab_size=97,
        hidden_size=32,
        num_attention_heads=4,
        num_hidden_layers=2,
        intermediate_size=48,
        max_position_embeddings=24,
    )
    return DistilBertConfig(**{**sizes, **changes})


# --- config and model structure --------------------------------------------------------------------


def test_config_defaults_presets_and_validation():
    base = DistilBertConfig.from_preset("distilbert-base")
    assert (base.num_hidden_layers, base.hidden_size, base.vocab_size) == (6, 768, 30522)
    assert (base.type_vocab_size, base.seq_classif_dropout, base.qa_dropout) == (0, 0.2, 0.1)
    assert DistilBertConfig.from_dict(base.to_dict()) == base
    with pytest.raises(ValueError, match="type_vocab_size=2 is invalid: DistilBERT has no segment"):
        DistilBertConfig(type_vocab_size=2)
    with pytest.raises(ValueError, match="seq_classif_dropout=1.0 is invalid"):
        DistilBertConfig(seq_classif_dropout=1.0)
    with pytest.raises(ValueError, match="needs a DistilBertConfig"):
        DistilBertModel(BertConfig.from_preset("bert-tiny"))


def test_no_token_types_and_no_pooler():
    model = DistilBertModel(small_config())
    assert model.embeddings.token_type_embeddings is None and model.pooler is None
    out = model(torch.randint(1, 97, (2, 5)))
    assert out.pooler_output is None
    with pytest.raises(ValueError, match="no pooler"):
        DistilBertModel(small_config(), add_pooling_layer=True)
    with pytest.raises(ValueError, match="type_vocab_size=0"):
        model(torch.randint(1, 97, (1, 4)), token_type_ids=torch.tensor([[0, 0, 1, 1]]))


# --- parity with transformers ------------------------------------------------------------------------


@pytest.mark.parametrize("config_name", CONFIGS)
@pytest.mark.parametrize("cls_name", CLASSES)
def test_outputs_equal_transformers(cls_name, config_name):
    hf = hf_model(cls_name, CONFIGS[config_name])
    ours = from_transformers(hf)
    assert type(ours).__name__ == cls_name and isinstance(ours.config, DistilBertConfig)
    assert_outputs_equal(ours, hf, padded_batch(), CONFIGS[config_name][2], TOL)


@pytest.mark.parametrize("cls_name", CLASSES)
def test_round_trip_state_dict_is_exact(cls_name):
    hf = hf_model(cls_name, CONFIGS["d48-heads4-relu"])
    back = to_transformers(from_transformers(hf))
    assert type(back) is type(hf)
    assert (back.config.dim, back.config.n_layers, back.config.hidden_dim) == (48, 2, 37)
    assert_state_dicts_equal(hf.state_dict(), back.state_dict())


@pytest.mark.parametrize(
    "cls_name, kwargs",
    [
        ("DistilBertForMaskedLM", {"labels": "mlm"}),
        ("DistilBertForSequenceClassification", {"labels": torch.tensor([0, 2, 1])}),
        ("DistilBertForTokenClassification", {"labels": torch.randint(0, 3, (3, SEQ))}),
        (
            "DistilBertForQuestionAnswering",
            {
                "start_positions": torch.tensor([1, 3, 20]),
                "end_positions": torch.tensor([2, 5, 20]),
            },
        ),
    ],
)
def test_losses_equal_transformers(cls_name, kwargs):
    hf = hf_model(cls_name, CONFIGS["d40-heads5-gelu"])
    ours = from_transformers(hf)
    assert_losses_equal(ours, hf, padded_batch(), kwargs, TOL)


def test_conversion_refuses_what_transformers_cannot_express():
    ours = DistilBertForMaskedLM(small_config(layer_norm_eps=1e-5))
    with pytest.raises(ValueError, match="fixes layer_norm_eps=1e-12"):
        to_transformers(ours)
    hf = transformers.DistilBertModel(
        transformers.DistilBertConfig(
            vocab_size=50,
            dim=16,
            n_heads=2,
            n_layers=1,
            hidden_dim=32,
            max_position_embeddings=20,
            sinusoidal_pos_embds=True,
        )
    )
    with pytest.raises(ValueError, match="sinusoidal_pos_embds=True is not supported"):
        from_transformers(hf)


# --- parameter counts --------------------------------------------------------------------------------


@pytest.mark.parametrize("cls_name", CLASSES)
def test_counts_equal_built_models(cls_name):
    config = small_config(
        vocab_size=333,
        hidden_size=60,
        num_attention_heads=5,
        num_hidden_layers=3,
        intermediate_size=70,
        max_position_embeddings=77,
        num_labels=5,
    )
    counted = count_parameters(config, cls_name)
    assert counted["total"] == getattr(dis, cls_name)(config).num_parameters()
    assert counted["total"] == sum(counted[c] for c in COMPONENTS)


def test_published_distilbert_sizes():
    base = DistilBertConfig.from_preset("distilbert-base")
    assert count_parameters(base, "DistilBertModel")["total"] == 66_362_880  # transformers' exact
    assert count_parameters(base, "DistilBertForMaskedLM")["total"] == 66_985_530
    assert count_parameters(base, "DistilBertForSequenceClassification")["total"] == 66_955_010
    bert = count_parameters(BertConfig.from_preset("bert-base"), "BertModel")
    counted = count_parameters(base, "DistilBertModel")
    # half the layers, and neither segment table nor pooler: 60.6% of BERT-base's parameters
    assert counted["attention"] * 2 == bert["attention"] and counted["pooler"] == 0
    assert round(counted["total"] / bert["total"], 3) == 0.606
    with pytest.raises(ValueError, match="no ForPreTraining"):
        count_parameters(base, "DistilBertForPreTraining")


# --- a student from a teacher --------------------------------------------------------------------------


def bert_teacher(layers: int = 4, cls=BertForMaskedLM, **changes) -> BertForMaskedLM:
    torch.manual_seed(3)
    config = BertConfig(
        vocab_size=97,
        hidden_size=32,
        num_attention_heads=4,
        num_hidden_layers=layers,
        intermediate_size=48,
        max_position_embeddings=24,
        **changes,
    )
    teacher = cls(config).eval()
    with torch.no_grad():  # non-trivial LayerNorms and biases, so every copied tensor is distinct
        for name, p in teacher.named_parameters():
            if "norm" in name.lower() or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return teacher


def test_default_layers_follow_the_reference_script():
    assert default_student_layers(12) == [0, 2, 4, 7, 9, 11]  # extract_distilbert.py
    assert default_student_layers(24) == [0, 2, 4, 6, 8, 10, 13, 15, 17, 19, 21, 23]
    assert default_student_layers(6) == [0, 3, 5]
    assert default_student_layers(4) == [0, 3]
    assert default_student_layers(2) == [0]
    for n in range(2, 30):  # always half the layers, distinct, first and (for n >= 4) last kept
        layers = default_student_layers(n)
        assert len(layers) == n // 2 and len(set(layers)) == n // 2 and layers[0] == 0
        assert layers == sorted(layers) and (n < 4 or layers[-1] == n - 1)


def test_student_copies_embeddings_chosen_layers_and_head():
    teacher = bert_teacher(layers=4)
    student = init_student_from_teacher(teacher)
    assert isinstance(student, DistilBertForMaskedLM) and student.teacher_layers == [0, 3]
    assert student.config.num_hidden_layers == 2 and student.config.type_vocab_size == 0
    assert student.backbone.embeddings.token_type_embeddings is None
    t_state, s_state = teacher.state_dict(), student.state_dict()
    for key, value in s_state.items():
        source = key
        for i, t_index in enumerate(student.teacher_layers):
            source = (
                source.replace(f"encoder.layers.{i}.", f"encoder.layers.{t_index}.")
                if (f"encoder.layers.{i}." in key)
                else source
            )
        assert torch.equal(value, t_state[source]), key
    assert student.mlm_head.decoder.weight is student.backbone.embeddings.word_embeddings.weight
    # a copy, not shared storage: training the student leaves the teacher alone
    assert student.backbone.embeddings.word_embeddings.weight.data_ptr() != (
        teacher.backbone.embeddings.word_embeddings.weight.data_ptr()
    )


@pytest.mark.parametrize("pre_ln", [False, True])
def test_student_with_all_layers_computes_the_teacher(pre_ln):
    """With every layer kept and a zero segment embedding, the student *is* the teacher."""
    teacher = bert_teacher(layers=3, pre_layer_norm=pre_ln)
    with torch.no_grad():
        teacher.backbone.embeddings.token_type_embeddings.weight.zero_()
    student = init_student_from_teacher(teacher, layers=[0, 1, 2]).eval()
    batch = dict(
        input_ids=torch.randint(4, 97, (2, 9)), attention_mask=torch.ones(2, 9, dtype=torch.long)
    )
    batch["attention_mask"][1, 6:] = 0
    with torch.no_grad():
        a, b = student(**batch), teacher(**batch)
    assert max_diff(a.last_hidden_state, b.last_hidden_state) < 1e-6
    assert max_diff(a.mlm_logits, b.mlm_logits) < 1e-6


def test_student_from_bare_bert_model_and_pretraining_teacher():
    bare = bert_teacher(layers=2, cls=BertModel)
    student = init_student_from_teacher(bare, layers=[1])
    assert student.teacher_layers == [1]
    assert torch.equal(
        student.backbone.encoder.layers[0].feed_forward.up.weight,
        bare.encoder.layers[1].feed_forward.up.weight,
    )
    pretraining = bert_teacher(layers=2, cls=BertForPreTraining)
    student = init_student_from_teacher(pretraining)
    assert torch.equal(student.mlm_head.dense.weight, pretraining.mlm_head.dense.weight)


def test_student_errors_name_the_problem():
    teacher = bert_teacher(layers=4)
    with pytest.raises(ValueError, match=r"layers=\[0, 4\] is invalid.*in \[0, 4\)"):
        init_student_from_teacher(teacher, layers=[0, 4])
    with pytest.raises(ValueError, match="non-empty"):
        init_student_from_teacher(teacher, layers=[])
    with pytest.raises(ValueError, match="must be a course_lib BERT"):
        init_student_from_teacher(DistilBertForMaskedLM(small_config()))


def test_sequence_classifier_reads_the_first_token_itself():
    """No pooler: pooler_output stays None and the head takes [CLS] from the token vectors."""
    classifier = dis.DistilBertForSequenceClassification(small_config(num_labels=4)).eval()
    ids = torch.randint(1, 97, (2, 5))
    with torch.no_grad():
        out = classifier(ids)
        by_hand = classifier.classifier(classifier.backbone(ids).last_hidden_state)
    assert out.pooler_output is None and torch.equal(out.logits, by_hand)
    assert out.logits.shape == (2, 4)
    qa = dis.DistilBertForQuestionAnswering(small_config(qa_dropout=0.25))
    assert qa.qa_head.dropout.p == 0.25
