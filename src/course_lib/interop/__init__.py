"""Conversion between course_lib models and `transformers` models, carrying the same weights.

Each family's module holds its tables (config translation, the backbone's keys, each head's
keys); `register_family` turns them into one conversion per class.
"""

from course_lib.interop import albert, bert, deberta, distilbert, electra, modernbert, roberta
from course_lib.interop.core import CONVERSIONS, from_transformers, register_family, to_transformers

for _family in (albert, bert, deberta, distilbert, electra, modernbert, roberta):
    register_family(_family)

__all__ = ["CONVERSIONS", "from_transformers", "to_transformers"]
