"""Pretraining: one loop for every objective, checkpoints, device/precision choice, DDP, CLI.

from course_lib.training import Trainer, TrainingConfig
trainer = Trainer(model, train_examples, collator, TrainingConfig(max_minutes=5), eval_examples)
history = trainer.train(); history.plot()
"""

from course_lib.training.checkpoint import load_checkpoint, load_pretrained, save_checkpoint
from course_lib.training.device import autocast, select_device, select_precision
from course_lib.training.engine import (
    History,
    ModelLoss,
    Objective,
    Trainer,
    TrainingConfig,
    TrainingDiverged,
)
from course_lib.training.optim import build_optimizer, lr_factor, param_groups

__all__ = [
    "History",
    "ModelLoss",
    "Objective",
    "Trainer",
    "TrainingConfig",
    "TrainingDiverged",
    "autocast",
    "build_optimizer",
    "load_checkpoint",
    "load_pretrained",
    "lr_factor",
    "param_groups",
    "save_checkpoint",
    "select_device",
    "select_precision",
]
