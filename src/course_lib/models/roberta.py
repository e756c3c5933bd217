"""RoBERTa as a diff from BERT (Liu et al. 2019): the architecture is BERT's; what changes is
the recipe (more data, dynamic masking, no NSP, byte-level BPE) and four small details here:

1. position ids start after the padding index (fairseq's convention): pads get position
   `pad_token_id`, real tokens `pad_token_id + 1, + 2, ...`, hence max_position_embeddings=514;
2. one segment type (type_vocab_size=1) and no NSP head;
3. layer_norm_eps=1e-5 and pad_token_id=1 (<s>=0, <pad>=1, </s>=2, <unk>=3);
4. sequence classification reads the <s> vector through its own dense+tanh head (no pooler),
   and the MLM head always uses exact GELU.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.config import RobertaConfig
from course_lib.counting import count_bert, linear, register_counter
from course_lib.models.bert import (
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from course_lib.modules.embeddings import BertEmbeddings


def create_position_ids_from_input_ids(input_ids: Tensor, padding_idx: int) -> Tensor:
    """Pads -> padding_idx; the real tokens of each row -> padding_idx + 1, + 2, ... (fairseq)."""
    real = input_ids.ne(padding_idx).long()
    return real.cumsum(dim=1) * real + padding_idx


class RobertaEmbeddings(BertEmbeddings):
    """BERT's embeddings with fairseq position ids (the pad row of the table stays zero)."""

    def __init__(self, config: RobertaConfig, embedding_size: int | None = None) -> None:
        super().__init__(config, embedding_size)
        self.padding_idx = config.pad_token_id
        self.position_embeddings = nn.Embedding(
            config.max_position_embeddings,
            self.word_embeddings.embedding_dim,
            padding_idx=self.padding_idx,
        )

    def position_ids(self, input_ids: Tensor) -> Tensor:
        longest = self.position_embeddings.num_embeddings - self.padding_idx - 1
        if input_ids.shape[1] > longest:
            raise ValueError(
                f"sequence length {input_ids.shape[1]} is too long: positions start at "
                f"pad_token_id + 1 = {self.padding_idx + 1}, so max_position_embeddings="
                f"{self.position_embeddings.num_embeddings} allows {longest} tokens; truncate the inputs."
            )
        return create_position_ids_from_input_ids(input_ids, self.padding_idx)


class RobertaModel(BertModel):
    """BERT with RoBERTa's embeddings (and its config); the pooler is kept, as in transformers."""

    config_class = RobertaConfig
    embeddings_class = RobertaEmbeddings


class RobertaForMaskedLM(BertForMaskedLM):
    base_model_class = RobertaModel
    config_class = RobertaConfig

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__(config)
        self.mlm_head.act = F.gelu  # transformers' RobertaLMHead ignores hidden_act


class RobertaClassificationHead(nn.Module):
    """dropout, dense, tanh, dropout, out_proj on the <s> vector (transformers' RoBERTa head)."""

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, first_token: Tensor) -> Tensor:
        x = torch.tanh(self.dense(self.dropout(first_token)))
        return self.out_proj(self.dropout(x))


class RobertaForSequenceClassification(BertForSequenceClassification):
    base_model_class = RobertaModel
    config_class = RobertaConfig
    add_pooling_layer = False

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__(config)
        self.classifier = RobertaClassificationHead(config)
        self.init_weights()

    def run_backbone(self, *args: Any) -> Any:
        out = super().run_backbone(*args)
        out.pooler_output = out.last_hidden_state[:, 0]  # no pooler: the raw <s> vector
        return out


class RobertaForTokenClassification(BertForTokenClassification):
    base_model_class = RobertaModel
    config_class = RobertaConfig

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__(config)
        self.classifier.dropout.p = config.classifier_dropout_prob


class RobertaForQuestionAnswering(BertForQuestionAnswering):
    base_model_class = RobertaModel
    config_class = RobertaConfig


@register_counter("roberta")
def count_roberta(config: RobertaConfig, task: str) -> dict[str, int]:
    """BERT's count (with P=514, T=1); sequence classification swaps pooler + linear for
    RoBERTa's head (dense + out_proj), which has exactly as many parameters."""
    if task == "ForPreTraining":
        raise ValueError("RoBERTa has no ForPreTraining model (no NSP); use ForMaskedLM.")
    counts = count_bert(config, task)
    if task == "ForSequenceClassification":
        h = config.hidden_size
        counts["pooler"], counts["heads"] = 0, linear(h, h) + linear(h, config.num_labels)
    return counts
