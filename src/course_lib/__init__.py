"""course_lib: the encoder-only family (BERT, RoBERTa, ALBERT, DeBERTa, DistilBERT) from parts."""

from course_lib.config import BertConfig

__all__ = ["BertConfig"]
__version__ = "0.1.0"
