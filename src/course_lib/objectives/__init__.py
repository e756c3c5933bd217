"""Pre-training objectives: MLM masking (and, elsewhere in this package, the losses)."""

from course_lib.objectives.masking import (
    IGNORE_INDEX,
    MaskingConfig,
    build_special_tokens_mask,
    mask_tokens,
)

__all__ = ["IGNORE_INDEX", "MaskingConfig", "build_special_tokens_mask", "mask_tokens"]
