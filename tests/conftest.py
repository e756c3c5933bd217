"""Shared fixtures: every test starts from the same torch seed; `one_thread` on request."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_everything():
    torch.manual_seed(0)
    yield


@pytest.fixture
def one_thread():
    """One torch thread for the test, restored afterwards. Tiny models gain nothing from a second
    thread (on a busy machine two OpenMP threads wait for each other at every op), and bitwise
    comparisons need the same thread count in every run (GEMM splits differ). Modules opt in
    with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
