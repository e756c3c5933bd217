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

from torch import Tensor, nn

from course_lib.activations import get_activation
from course_lib.config import BertConfig, RobertaConfig
from course_lib.models.bert import (
    BertEmbeddings,
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    MaskedLMHead,
    TokenClassificationHead,
)


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


class RobertaLMHead(MaskedLMHead):
    """BERT's MLM head with exact GELU whatever `hidden_act` says (transformers' RobertaLMHead)."""

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__(config, activation="gelu")


class FirstTokenClassificationHead(nn.Module):
    """For encoders without a pooler: the first token's vector -> (dropout) -> dense ->
    activation -> dropout -> out_proj. RoBERTa: tanh, dropout first too; DistilBERT: ReLU
    (transformers names its dense layer `pre_classifier`)."""

    def __init__(
        self, config: BertConfig, activation: str, dropout: float, dropout_first: bool
    ) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)
        self.act = get_activation(activation)
        self.dropout_first = dropout_first

    def forward(self, hidden: Tensor) -> Tensor:
        x = hidden[:, 0]  # (B, H): the <s> / [CLS] vector
        if self.dropout_first:
            x = self.dropout(x)
        return self.out_proj(self.dropout(self.act(self.dense(x))))  # (B, num_labels)


class RobertaClassificationHead(FirstTokenClassificationHead):
    """dropout, dense, tanh, dropout, out_proj on the <s> vector (transformers' RoBERTa head):
    it takes the token vectors and reads the first itself, as RoBERTa has no pooler."""

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__(config, "tanh", config.classifier_dropout_prob, dropout_first=True)


class RobertaTokenClassificationHead(TokenClassificationHead):
    """BERT's token head with RoBERTa's classifier dropout."""

    def __init__(self, config: RobertaConfig) -> None:
        super().__init__(config, dropout=config.classifier_dropout_prob)


# Each task model names what it changes relative to its BERT parent: the config, the backbone,
# and the head that differs.


class RobertaForMaskedLM(BertForMaskedLM):
    """RoBERTa with the masked-language-model head (exact GELU, decoder tied to the embeddings)."""

    config_class = RobertaConfig
    base_model_class = RobertaModel
    mlm_head_class = RobertaLMHead


class RobertaForSequenceClassification(BertForSequenceClassification):
    """One label per sequence, from the <s> vector through RoBERTa's own head (no pooler)."""

    config_class = RobertaConfig
    base_model_class = RobertaModel
    add_pooling_layer = False
    classifier_class = RobertaClassificationHead


class RobertaForTokenClassification(BertForTokenClassification):
    """One label per token (dropout: classifier_dropout_prob)."""

    config_class = RobertaConfig
    base_model_class = RobertaModel
    classifier_class = RobertaTokenClassificationHead


class RobertaForQuestionAnswering(BertForQuestionAnswering):
    """Extractive QA: start and end logits per token."""

    config_class = RobertaConfig
    base_model_class = RobertaModel
