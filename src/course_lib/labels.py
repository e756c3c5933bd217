"""Label conventions that data, objectives, models and training share (one definition each)."""

IGNORE_INDEX = -100  # label value that cross-entropy skips (torch's default ignore_index)

__all__ = ["IGNORE_INDEX"]
