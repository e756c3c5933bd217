"""check_inputs: metadata checks always, id-range checks only where they cost no device sync."""

import pytest
import torch

from course_lib import BertConfig
from course_lib.models.inputs import check_inputs

CONFIG = BertConfig(
    vocab_size=50,
    hidden_size=8,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=16,
    max_position_embeddings=16,
)


def test_ranges_checked_on_cpu_by_default():
    with pytest.raises(ValueError, match="token id 50 is outside the vocabulary"):
        check_inputs(CONFIG, torch.full((1, 4), 50))
    with pytest.raises(ValueError, match="token id -1 is outside the vocabulary"):
        check_inputs(CONFIG, torch.tensor([[3, -1, 4]]))
    with pytest.raises(ValueError, match="token_type_ids contain 2"):
        check_inputs(CONFIG, torch.ones(1, 3, dtype=torch.long), None, torch.tensor([[0, 1, 2]]))
    check_inputs(CONFIG, torch.tensor([[0, 49]]), None, torch.tensor([[0, 1]]))  # both ends valid


def test_ranges_not_read_off_the_host_unless_asked():
    """A meta tensor has no values: reading them (int(x.max()), a device sync on a GPU) raises,
    so passing here proves the default reads nothing from a non-CPU tensor."""
    ids = torch.full((1, 4), 50, device="meta")
    check_inputs(CONFIG, ids, None, torch.full((1, 4), 7, device="meta"))
    with pytest.raises(ValueError, match="max_position_embeddings=16"):  # metadata still checked
        check_inputs(CONFIG, torch.zeros(1, 17, dtype=torch.long, device="meta"))
    with pytest.raises(ValueError, match="integer token ids"):
        check_inputs(CONFIG, torch.zeros(1, 4, device="meta"))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        check_inputs(CONFIG, torch.full((1, 4), 50), check_values=True)
    check_inputs(CONFIG, torch.full((1, 4), 50), check_values=False)  # opted out: not read
