"""Mechanism labs of the albert chapter (filled in by this chapter's labs)."""
