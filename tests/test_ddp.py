"""DistributedDataParallel on 2 CPU processes (gloo) matches one process with the same global batch."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file
from training_helpers import ToyCollator, tiny_mlm, toy_examples

from course_lib.training import Trainer, TrainingConfig
from course_lib.training.checkpoint import read_state
from course_lib.training.distributed import micro_batch_slots

STEPS = 4


def _config(accumulation: int, output_dir: str | None = None) -> TrainingConfig:
    return TrainingConfig(
        max_steps=STEPS,
        batch_size=8,
        gradient_accumulation_steps=accumulation,
        lr=3e-3,
        log_every=1,
        progress=False,
        precision="fp32",
        device="cpu",
        output_dir=output_dir,
    )


def _worker(rank: int, world_size: int, tmp: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=world_size
    )
    try:
        trainer = Trainer(
            tiny_mlm(seed=0),  # same init on every rank (DDP also broadcasts rank 0's weights)
            toy_examples(96),
            ToyCollator(),
            _config(accumulation=2, output_dir=f"{tmp}/run"),
            eval_dataset=toy_examples(40, seed=1),
        )
        history = trainer.train()
        weights = {k: v.contiguous() for k, v in trainer.model.state_dict().items()}
        weights.pop("mlm_head.decoder.weight")  # tied to the word embeddings
        losses = torch.tensor([r["train_loss"] for r in history], dtype=torch.float64)
        save_file(
            {**weights, "losses": losses, "eval": torch.tensor(history[-1]["eval_mlm_accuracy"])},
            f"{tmp}/rank{rank}.safetensors",
        )
    finally:
        dist.destroy_process_group()


def test_micro_batch_slots_are_rank_strided():
    assert micro_batch_slots(0, 2, 2) == [0, 2] and micro_batch_slots(1, 2, 2) == [1, 3]
    assert micro_batch_slots(0, 1, 4) == [0, 1, 2, 3]


@pytest.mark.slow
def test_two_processes_match_one_process_with_the_same_global_batch(tmp_path):
    mp.spawn(_worker, args=(2, str(tmp_path)), nprocs=2, join=True)
    rank0, rank1 = (load_file(str(tmp_path / f"rank{r}.safetensors")) for r in (0, 1))

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:  # one process, 4 micro-batches of 8 = the same global batch of 32 per step
        single = Trainer(tiny_mlm(seed=0), toy_examples(96), ToyCollator(), _config(accumulation=4))
        history = single.train()
    finally:
        torch.set_num_threads(before)

    for name, value in single.model.state_dict().items():
        if name == "mlm_head.decoder.weight":
            continue
        assert torch.equal(rank0[name], rank1[name]), f"ranks disagree on {name}"
        torch.testing.assert_close(rank0[name], value, rtol=1e-5, atol=1e-6, msg=name)
    single_losses = torch.tensor([r["train_loss"] for r in history], dtype=torch.float64)
    torch.testing.assert_close(rank0["losses"], single_losses, rtol=1e-6, atol=1e-7)
    assert 0.0 <= float(rank0["eval"]) <= 1.0 and torch.equal(rank0["eval"], rank1["eval"])
    state = read_state(tmp_path / "run" / "checkpoint")  # written once, by rank 0
    assert state["step"] == STEPS and state["world_size"] == 2
    assert state["data"]["global_batch_size"] == 32
