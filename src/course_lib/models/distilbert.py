"""DistilBERT as a diff from BERT (Sanh et al. 2019): the same layers, half as many (6 for a
12-layer teacher), no segment embeddings, no pooler; it is trained by distillation from a BERT
teacher (course_lib.objectives.distillation), starting from one teacher layer out of two.

Config field names stay BERT's (interop maps them to transformers' dim / n_layers / ...).
Differences in training mode only: transformers' DistilBERT has no dropout after the attention
output projection (BERT's layer, reused here, has one), and dropout before its QA head (kept).
"""

from __future__ import annotations

from torch import Tensor, nn

from course_lib.config import DistilBertConfig
from course_lib.models.bert import (
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    QuestionAnsweringHead,
)
from course_lib.models.roberta import FirstTokenClassificationHead


class DistilBertModel(BertModel):
    """BERT without token-type embeddings (type_vocab_size=0) and without a pooler."""

    config_class = DistilBertConfig

    def __init__(self, config: DistilBertConfig, add_pooling_layer: bool = False) -> None:
        if add_pooling_layer:
            raise ValueError("DistilBERT has no pooler; build it with add_pooling_layer=False.")
        super().__init__(config, add_pooling_layer=False)


class DistilBertClassificationHead(FirstTokenClassificationHead):
    """dense (transformers' `pre_classifier`), ReLU, dropout, out_proj (its `classifier`) on the
    [CLS] vector, which the head reads itself, as DistilBERT has no pooler."""

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__(config, "relu", config.seq_classif_dropout, dropout_first=False)


class DistilBertQuestionAnsweringHead(QuestionAnsweringHead):
    """BERT's span head with dropout (qa_dropout) on the hidden states first."""

    def __init__(self, config: DistilBertConfig) -> None:
        super().__init__(config)
        self.dropout = nn.Dropout(config.qa_dropout)

    def forward(self, hidden: Tensor) -> tuple[Tensor, Tensor]:
        return super().forward(self.dropout(hidden))


# Each task model names what it changes relative to its BERT parent: the config, the backbone,
# and the head that differs.


class DistilBertForMaskedLM(BertForMaskedLM):
    """BERT's MLM head exactly (transformers: vocab_transform, activation, vocab_layer_norm,
    vocab_projector tied to the word embeddings)."""

    config_class = DistilBertConfig
    base_model_class = DistilBertModel


class DistilBertForSequenceClassification(BertForSequenceClassification):
    """One label per sequence, from the [CLS] vector through DistilBERT's head (no pooler)."""

    config_class = DistilBertConfig
    base_model_class = DistilBertModel
    add_pooling_layer = False
    classifier_class = DistilBertClassificationHead


class DistilBertForTokenClassification(BertForTokenClassification):
    """One label per token: BERT's head."""

    config_class = DistilBertConfig
    base_model_class = DistilBertModel


class DistilBertForQuestionAnswering(BertForQuestionAnswering):
    """Extractive QA, with dropout (qa_dropout) before the span head."""

    config_class = DistilBertConfig
    base_model_class = DistilBertModel
    qa_head_class = DistilBertQuestionAnsweringHead


# --- a student initialised from a teacher -----------------------------------------------------


def default_student_layers(num_teacher_layers: int) -> list[int]:
    """Half the teacher's layers, spread evenly from its first to its last layer.

    For 12 layers this gives 0, 2, 4, 7, 9, 11 -- exactly the layers the reference script
    (transformers' examples/research_projects/distillation/scripts/extract_distilbert.py) takes.
    Keeping the last layer matters: the copied MLM head was trained on its output.
    """
    n, k = num_teacher_layers, max(1, num_teacher_layers // 2)
    if k == 1:
        return [0]
    return [int(i * (n - 1) / (k - 1) + 0.5) for i in range(k)]  # round half up


def init_student_from_teacher(
    teacher: BertForMaskedLM | BertModel, layers: list[int] | None = None
) -> DistilBertForMaskedLM:
    """A DistilBERT student with the teacher's sizes and a copy of its weights: word and position
    embeddings (+ their LayerNorm; the token-type table is dropped), teacher layer `layers[i]`
    as student layer i, and the MLM head (left randomly initialised if `teacher` is a BertModel).

    `student.teacher_layers` records which teacher layer each student layer came from.
    """
    backbone = getattr(teacher, "backbone", teacher)
    if not isinstance(backbone, BertModel) or backbone.config.model_type != "bert":
        raise ValueError(
            f"the teacher must be a course_lib BERT (BertModel or BertForMaskedLM), got "
            f"{type(teacher).__name__}; convert a transformers model with from_transformers first."
        )
    t_config = backbone.config
    n_teacher = t_config.num_hidden_layers
    layers = default_student_layers(n_teacher) if layers is None else list(layers)
    bad = [i for i in layers if not (isinstance(i, int) and 0 <= i < n_teacher)]
    if not layers or bad:
        raise ValueError(
            f"layers={layers} is invalid: expected a non-empty list of teacher layer indices in "
            f"[0, {n_teacher}) (the teacher has {n_teacher} layers)."
        )
    fields = {
        k: v for k, v in t_config.to_dict().items() if k not in ("model_type", "type_vocab_size")
    }
    config = DistilBertConfig(**{**fields, "num_hidden_layers": len(layers), "type_vocab_size": 0})
    student = DistilBertForMaskedLM(config)
    s_emb, t_emb = student.backbone.embeddings, backbone.embeddings
    s_emb.word_embeddings.load_state_dict(t_emb.word_embeddings.state_dict())
    s_emb.position_embeddings.load_state_dict(t_emb.position_embeddings.state_dict())
    s_emb.LayerNorm.load_state_dict(t_emb.LayerNorm.state_dict())
    for s_layer, t_index in zip(student.backbone.encoder.layers, layers):
        s_layer.load_state_dict(backbone.encoder.layers[t_index].state_dict())
    if backbone.encoder.final_norm is not None:  # pre-LN teachers end with one more LayerNorm
        student.backbone.encoder.final_norm.load_state_dict(
            backbone.encoder.final_norm.state_dict()
        )
    t_head = getattr(teacher, "mlm_head", None)
    if t_head is not None:
        for name in ("dense", "LayerNorm"):
            getattr(student.mlm_head, name).load_state_dict(getattr(t_head, name).state_dict())
        student.mlm_head.decoder.bias.data.copy_(t_head.decoder.bias.data)
    student.teacher_layers = layers
    return student
