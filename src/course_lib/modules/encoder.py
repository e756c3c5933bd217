"""BERT's encoder layer and stack now live in models/bert.py, read in order with the rest of
BERT; this module keeps the old import path (`from course_lib.modules.encoder import ...`)."""

from course_lib.models.bert import Encoder, EncoderLayer

__all__ = ["Encoder", "EncoderLayer"]
