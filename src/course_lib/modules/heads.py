"""The heads now live with their models: BERT's pooler, pretraining and fine-tuning heads in
models/bert.py, the first-token classification head (RoBERTa, DistilBERT) in models/roberta.py.
This module keeps the old import path and the `heads.X` namespace."""

from course_lib.models.bert import (
    MaskedLMHead,
    NextSentenceHead,
    Pooler,
    QuestionAnsweringHead,
    SequenceClassificationHead,
    TokenClassificationHead,
)
from course_lib.models.roberta import FirstTokenClassificationHead

__all__ = [
    "FirstTokenClassificationHead",
    "MaskedLMHead",
    "NextSentenceHead",
    "Pooler",
    "QuestionAnsweringHead",
    "SequenceClassificationHead",
    "TokenClassificationHead",
]
