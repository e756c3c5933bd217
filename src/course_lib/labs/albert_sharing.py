"""Mechanism labs (filled in by this chapter's labs)."""
