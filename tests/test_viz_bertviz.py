"""bertviz offline: every view carries a visible plain-HTML notice that it needs internet and names
the offline explorer (the browser test, which checks it renders, needs chromium and is skipped here)."""

from html.parser import HTMLParser

import pytest
import torch

from course_lib.viz.bertviz_view import bertviz_head_view, bertviz_model_view

TOKENS = ["[CLS]", "a", "b", "[SEP]"]
ATTENTIONS = [torch.softmax(torch.randn(1, 2, 4, 4), -1) for _ in range(2)]


class VisibleText(HTMLParser):
    """The text a browser without JavaScript shows: everything outside <script> and <style>."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.hidden += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.hidden -= 1

    def handle_data(self, data):
        if not self.hidden:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = VisibleText()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


@pytest.mark.parametrize("view", [bertviz_head_view, bertviz_model_view])
def test_every_view_says_visibly_that_it_needs_internet_and_names_the_offline_explorer(view):
    html = view(ATTENTIONS, tokens=TOKENS).data
    text = visible_text(html)
    assert "bertviz needs internet in the browser" in text
    assert "empty Layer: menu" in text
    assert "course_lib.viz.show_attention(model, text, tokenizer)" in text
    # above the view, and before any script that could fail
    assert html.index("bertviz needs internet") < html.index("<script")
    assert "require.min.js" in html  # the view itself is still there


def test_the_notice_is_not_what_bertviz_writes_by_itself():
    """Premise: bertviz's own output shows no such text without JavaScript."""
    from bertviz import head_view

    raw = head_view(ATTENTIONS, TOKENS, html_action="return").data
    assert "needs internet" not in visible_text(raw)
