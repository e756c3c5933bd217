"""The parts every encoder is built from: embeddings, attention, feed-forward, layers, heads."""

from course_lib.modules import heads  # the heads as one namespace: heads.MaskedLMHead, ...
from course_lib.modules.attention import MultiHeadSelfAttention, scaled_dot_product_attention
from course_lib.modules.embeddings import BertEmbeddings
from course_lib.modules.encoder import Encoder, EncoderLayer
from course_lib.modules.feed_forward import FeedForward, get_activation

__all__ = [
    "BertEmbeddings",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "MultiHeadSelfAttention",
    "get_activation",
    "heads",
    "scaled_dot_product_attention",
]
