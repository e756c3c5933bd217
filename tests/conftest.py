"""Shared fixtures: deterministic torch, small thread count so tests behave on 2-core machines."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_everything():
    torch.manual_seed(0)
    yield
