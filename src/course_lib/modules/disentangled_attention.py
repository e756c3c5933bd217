"""DeBERTa's disentangled self-attention now lives in models/deberta.py, as BERT's attention with
one method (`scores`) overridden; this module keeps the old import path."""

from course_lib.models.deberta import DisentangledSelfAttention

__all__ = ["DisentangledSelfAttention"]
