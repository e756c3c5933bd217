"""Mechanism labs of the distil chapter (filled in by this chapter's labs)."""
