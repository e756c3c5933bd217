"""BERT's feed-forward network now lives in models/bert.py (and `get_activation` in
activations.py); this module keeps the old import path."""

from course_lib.activations import get_activation
from course_lib.models.bert import FeedForward

__all__ = ["FeedForward", "get_activation"]
