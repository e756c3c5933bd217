"""Shared fixtures: every test starts from the same torch seed."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_everything():
    torch.manual_seed(0)
    yield
