"""Mechanism labs of the roberta chapter (filled in by this chapter's labs)."""
