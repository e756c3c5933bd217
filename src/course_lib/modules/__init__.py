"""The parts every encoder is built from: embeddings, attention, feed-forward, layers, heads."""

from course_lib.modules.attention import MultiHeadSelfAttention, scaled_dot_product_attention
from course_lib.modules.embeddings import BertEmbeddings
from course_lib.modules.encoder import Encoder, EncoderLayer
from course_lib.modules.feed_forward import FeedForward, get_activation
from course_lib.modules.heads import (
    MaskedLMHead,
    NextSentenceHead,
    Pooler,
    QuestionAnsweringHead,
    SequenceClassificationHead,
    TokenClassificationHead,
)

__all__ = [
    "BertEmbeddings",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "MaskedLMHead",
    "MultiHeadSelfAttention",
    "NextSentenceHead",
    "Pooler",
    "QuestionAnsweringHead",
    "SequenceClassificationHead",
    "TokenClassificationHead",
    "get_activation",
    "scaled_dot_product_attention",
]
