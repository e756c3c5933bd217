"""Conversion between course_lib models and `transformers` models, carrying the same weights."""

# Importing a family's module registers its weight tables.
from course_lib.interop import albert as _albert  # noqa: F401
from course_lib.interop import bert as _bert  # noqa: F401
from course_lib.interop import deberta as _deberta  # noqa: F401
from course_lib.interop import distilbert as _distilbert  # noqa: F401
from course_lib.interop import roberta as _roberta  # noqa: F401
from course_lib.interop.core import CONVERSIONS, from_transformers, to_transformers

__all__ = ["CONVERSIONS", "from_transformers", "to_transformers"]
