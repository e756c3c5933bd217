"""Multi-head self-attention now lives in models/bert.py, read in order with the rest of BERT;
this module keeps the old import path (`from course_lib.modules.attention import ...`)."""

from course_lib.models.bert import (
    MultiHeadSelfAttention,
    additive_mask,
    scaled_dot_product_attention,
)

__all__ = ["MultiHeadSelfAttention", "additive_mask", "scaled_dot_product_attention"]
