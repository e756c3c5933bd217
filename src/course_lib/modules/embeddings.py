"""BERT's input embeddings now live in models/bert.py, read in order with the rest of BERT;
this module keeps the old import path (`from course_lib.modules.embeddings import ...`)."""

from course_lib.models.bert import BertEmbeddings

__all__ = ["BertEmbeddings"]
