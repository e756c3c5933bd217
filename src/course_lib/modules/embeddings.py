"""Input embeddings: what a token is, where it is, and which segment it belongs to."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib.config import BertConfig


class BertEmbeddings(nn.Module):
    """token + learned absolute position + segment, then LayerNorm and dropout.

    The three lookups are simply added: the model learns to keep the signals apart in
    different directions of the same hidden space.
    """

    # Whether the absolute positions are added here. DeBERTa turns this off: its positions enter
    # the attention scores as relative distances instead.
    position_biased_input: bool = True

    def __init__(self, config: BertConfig, embedding_size: int | None = None) -> None:
        super().__init__()
        # ALBERT passes a smaller embedding_size E; BERT embeds straight into hidden_size.
        dim = embedding_size or config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, dim, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, dim)
        # DistilBERT and RoBERTa-style models with type_vocab_size=0 have no segment table.
        self.token_type_embeddings = (
            nn.Embedding(config.type_vocab_size, dim) if config.type_vocab_size > 0 else None
        )
        self.LayerNorm = nn.LayerNorm(dim, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def position_ids(self, input_ids: Tensor) -> Tensor:
        """0, 1, 2, ... for every row; RoBERTa overrides this one method."""
        seq_len = input_ids.shape[1]
        return torch.arange(seq_len, device=input_ids.device).expand_as(input_ids)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        x = self.word_embeddings(input_ids)
        if self.position_biased_input:
            x = x + self.position_embeddings(self.position_ids(input_ids))
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))
