"""The `@lab` decorator: a seed runner's docstring is its lab's card (question, metric, paper,
why), the function name is the lab's name, and the registered lab runs the function itself."""

from __future__ import annotations

import pytest
import torch

from course_lib.labs import LABS, core, lab


def _register(**decorator_args):
    """Decorate a two-arm runner called `toy_card` and return (function, registered Lab)."""

    def toy_card(seed: int, preset: str, device: torch.device) -> dict[str, float]:
        """Does the toy question hold? A sentence that
        wraps onto a second line.

        Metric: the toy metric (chance 1/2)

        Paper: Someone et al. 2020, Table 1.

        Why: The arms differ
        in one thing only."""
        return {"a": 1.0 + seed, "b": 0.0, "c": 0.5}

    try:
        returned = lab(**{"chapter": "01_bert", "expected_sign": "+", **decorator_args})(toy_card)
        return returned, LABS["toy_card"]
    finally:
        LABS.pop("toy_card", None)


def test_card_comes_from_the_docstring_and_the_name_from_the_function():
    fn, registered = _register(arms=("a", "b", "c"))
    assert registered.name == "toy_card"
    assert (
        registered.question
        == "Does the toy question hold? A sentence that wraps onto a second line."
    )
    assert registered.metric == "the toy metric (chance 1/2)"
    assert registered.paper == "Someone et al. 2020, Table 1."
    assert registered.why == "The arms differ in one thing only."
    assert registered.compare == ("a", "b")  # the first two arms unless told
    assert registered.run_seed is fn and fn(2, "fast", torch.device("cpu"))["a"] == 3.0


def test_keyword_text_and_compare_take_precedence():
    _, registered = _register(arms=("a", "b", "c"), compare=("a", "c"), metric="computed: 0.25")
    assert registered.compare == ("a", "c")
    assert registered.metric == "computed: 0.25"
    assert registered.why == "The arms differ in one thing only."


def test_a_runner_without_a_card_is_refused_with_the_format():
    def bare(seed: int, preset: str, device: torch.device) -> dict[str, float]:
        return {"a": 0.0, "b": 0.0}

    with pytest.raises(ValueError, match="no question, metric, paper, why.*Metric:"):
        lab("01_bert", arms=("a", "b"), expected_sign="+")(bare)
    assert "bare" not in LABS


def test_an_unknown_paragraph_is_refused():
    with pytest.raises(ValueError, match="unexpected paragraph"):
        core.read_card("Question?\n\nMetrics: a typo in the label")


def test_every_registered_lab_has_a_full_card():
    for name, registered in LABS.items():
        assert registered.run_seed.__name__ == name
        for field in ("question", "metric", "paper", "why"):
            text = getattr(registered, field)
            assert text and "\n" not in text and "  " not in text, (name, field)
