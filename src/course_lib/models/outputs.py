"""Output objects: named fields as in `transformers`, so skills transfer both ways."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class ModelOutput:
    """Everything a course_lib model can return; fields a model does not produce stay None.

    `mlm_logits` is [batch, seq, vocab] when called without labels. With labels it holds only
    the rows at masked positions ([n_masked, vocab]) because the vocabulary projection is the
    most expensive matmul and the other rows are never used by the loss; `mlm_positions`
    ([n_masked, 2], batch and sequence index) says where each row came from.
    """

    last_hidden_state: Tensor | None = None
    pooler_output: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None
    loss: Tensor | None = None
    mlm_loss: Tensor | None = None
    mlm_logits: Tensor | None = None
    mlm_positions: Tensor | None = None
    nsp_loss: Tensor | None = None  # BERT's next-sentence prediction
    nsp_logits: Tensor | None = None
    sop_loss: Tensor | None = None  # ALBERT's sentence-order prediction
    sop_logits: Tensor | None = None
    logits: Tensor | None = None
    start_logits: Tensor | None = None
    end_logits: Tensor | None = None

    def __getitem__(self, key: str) -> Tensor | None:
        return getattr(self, key)
