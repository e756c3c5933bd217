"""The parts a variant adds to BERT's: relative positions (DeBERTa), rotary embeddings, local
attention and unpadding (ModernBERT), cross-layer sharing (ALBERT).

BERT's own parts (embeddings, attention, feed-forward, layers, heads) live in models/bert.py;
they are re-exported here, and from modules/attention.py, embeddings.py, encoder.py,
feed_forward.py and heads.py, so the old import paths keep working.
"""

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
