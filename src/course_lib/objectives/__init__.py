"""Pre-training objectives: MLM masking, and the distillation losses (the MLM and NSP/SOP losses
live with their heads in course_lib.models)."""

from course_lib.objectives.distillation import (
    DistillationObjective,
    hidden_cosine_loss,
    kl_distillation_loss,
)
from course_lib.objectives.masking import (
    IGNORE_INDEX,
    MaskingConfig,
    build_special_tokens_mask,
    mask_tokens,
)

__all__ = [
    "IGNORE_INDEX",
    "DistillationObjective",
    "MaskingConfig",
    "build_special_tokens_mask",
    "hidden_cosine_loss",
    "kl_distillation_loss",
    "mask_tokens",
]
