"""Mechanism labs of the deberta chapter (filled in by this chapter's labs)."""
