"""The training loop: schedules, parameter groups, learning, resume, divergence, signals."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from training_helpers import ToyCollator, tiny_mlm, tiny_pretraining, toy_examples

from course_lib.training import Trainer, TrainingConfig, TrainingDiverged, lr_factor, param_groups
from course_lib.training.checkpoint import read_state
from course_lib.training.engine import EpochSampler, ModelLoss

TESTS_DIR = Path(__file__).parent


pytestmark = pytest.mark.usefixtures("one_thread")


def make_trainer(model=None, steps=6, examples=None, **overrides) -> Trainer:
    config = dict(
        max_steps=steps, batch_size=8, lr=3e-3, log_every=1, progress=False, precision="fp32"
    )
    config.update(overrides)
    return Trainer(
        model if model is not None else tiny_mlm(),
        examples if examples is not None else toy_examples(64),
        ToyCollator(),
        TrainingConfig(**config),
        eval_dataset=toy_examples(32, seed=1),
    )


# --- schedules and parameter groups -------------------------------------------------------------


def test_linear_schedule_warms_up_then_decays_to_zero():
    assert lr_factor("linear", 0.0, 0.1) == 0.0
    assert lr_factor("linear", 0.05, 0.1) == pytest.approx(0.5)
    assert lr_factor("linear", 0.1, 0.1) == pytest.approx(1.0)
    assert lr_factor("linear", 0.55, 0.1) == pytest.approx(0.5)
    assert lr_factor("linear", 1.0, 0.1) == 0.0
    assert lr_factor("constant", 0.7, 0.1) == 1.0


def test_one_cycle_matches_torch_one_cycle_endpoints():
    assert lr_factor("one-cycle", 0.0, 0.3) == pytest.approx(1 / 25)
    assert lr_factor("one-cycle", 0.3, 0.3) == pytest.approx(1.0)
    assert lr_factor("one-cycle", 1.0, 0.3) == pytest.approx(1 / 25 / 1e4)
    # Compare the middle of the decay with torch's own OneCycleLR (cosine annealing).
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=1.0, total_steps=101, pct_start=0.3, three_phase=False
    )
    lrs = []
    with warnings.catch_warnings():  # scheduler.step() without optimizer.step(): fine here
        warnings.simplefilter("ignore")
        for _ in range(101):
            lrs.append(opt.param_groups[0]["lr"])
            sched.step()
    assert lr_factor("one-cycle", 0.65, 0.3) == pytest.approx(lrs[65], rel=0.05)


def test_bad_schedule_arguments_are_named():
    with pytest.raises(ValueError, match="schedule='cosine'"):
        lr_factor("cosine", 0.5, 0.1)
    with pytest.raises(ValueError, match="warmup=1.5"):
        lr_factor("linear", 0.5, 1.5)


def test_no_weight_decay_on_biases_and_layernorm():
    model = tiny_mlm()
    decay, plain = param_groups(model, weight_decay=0.01)
    assert decay["weight_decay"] == 0.01 and plain["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    plain_names = {names[id(p)] for p in plain["params"]}
    decay_names = {names[id(p)] for p in decay["params"]}
    assert all(n.endswith("bias") or "LayerNorm" in n or "norm" in n.lower() for n in plain_names)
    assert all(n.endswith("weight") and "LayerNorm" not in n for n in decay_names)
    assert any("LayerNorm" in n for n in plain_names)
    # Every trainable tensor exactly once (the tied decoder/embedding matrix is one tensor).
    assert len(decay["params"]) + len(plain["params"]) == len(list(model.parameters()))


# --- configuration and data order ---------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [("objective", "clm"), ("batch_size", 0), ("max_minutes", -1.0), ("lr", 0.0), ("warmup", 1.0)],
)
def test_training_config_names_the_bad_field(field, value):
    with pytest.raises(ValueError, match=field):
        TrainingConfig(max_steps=10, **{field: value})


def test_training_config_needs_a_budget():
    with pytest.raises(ValueError, match="max_steps or max_minutes"):
        TrainingConfig()


def test_epoch_sampler_visits_every_example_once_per_epoch():
    sampler = EpochSampler(num_examples=40, global_batch_size=8, micro_batch_size=4, seed=3)
    assert sampler.steps_per_epoch == 5
    seen = [i for step in range(5) for slot in range(2) for i in sampler.indices(step, slot)]
    assert sorted(seen) == list(range(40))
    next_epoch = [i for slot in range(2) for i in sampler.indices(5, slot)]
    assert next_epoch != seen[:8]  # a fresh permutation per epoch
    again = EpochSampler(40, 8, 4, seed=3)
    assert again.indices(7, 1) == sampler.indices(7, 1)  # a pure function of (seed, step, slot)
    with pytest.raises(ValueError, match="fewer than one global batch"):
        EpochSampler(num_examples=6, global_batch_size=8, micro_batch_size=8, seed=0)


# --- the loop -----------------------------------------------------------------------------------


def test_trainer_learns_the_toy_task():
    model = tiny_mlm(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    trainer = make_trainer(
        model, steps=150, examples=toy_examples(600), batch_size=16, lr=1e-2, eval_every=50
    )
    history = trainer.train()
    evals = [r for r in history if "eval_mlm_accuracy" in r]
    assert [r["step"] for r in evals] == [50, 100, 150]
    # Chance is 1/60 (1.7%) and the untrained loss ln(64) = 4.16.
    assert evals[-1]["eval_mlm_accuracy"] > 0.10
    assert evals[-1]["eval_mlm_loss"] < math.log(64) - 0.8
    assert trainer.stop_reason == "max_steps" and trainer.step == 150


def test_history_has_the_documented_fields_and_the_schedule():
    trainer = make_trainer(steps=10, warmup=0.2, eval_every=5)
    history = trainer.train()
    assert [r["step"] for r in history] == list(range(1, 11))
    for record in history:
        assert {"step", "train_loss", "lr", "tokens_per_s", "train_mlm_loss"} <= set(record)
        assert record["tokens_per_s"] > 0 and math.isfinite(record["train_loss"])
        # lr of step s (1-based) is evaluated mid-step: progress (s - 0.5) / 10.
        assert record["lr"] == pytest.approx(
            3e-3 * lr_factor("linear", (record["step"] - 0.5) / 10, 0.2)
        )
    assert {"eval_mlm_loss", "eval_mlm_accuracy"} <= set(
        history[4]
    ) and "eval_mlm_loss" not in history[5]
    assert history.last("eval_mlm_accuracy") == history[9]["eval_mlm_accuracy"]


def test_sop_objective_feeds_the_sentence_head_and_reports_its_accuracy():
    trainer = Trainer(
        tiny_pretraining(),
        toy_examples(64, sentence_labels=True),
        ToyCollator(),
        TrainingConfig(objective="mlm+sop", max_steps=3, batch_size=8, progress=False),
        eval_dataset=toy_examples(32, seed=1, sentence_labels=True),
    )
    history = trainer.train()
    last = history[-1]
    assert "train_nsp_loss" in last  # the model got the SOP labels through next_sentence_label
    assert last["train_loss"] == pytest.approx(last["train_mlm_loss"] + last["train_nsp_loss"])
    assert 0.0 <= last["eval_sop_accuracy"] <= 1.0 and "eval_nsp_accuracy" not in last


def test_a_custom_objective_replaces_the_model_loss():
    calls = []

    class HalfLoss:
        def __call__(self, model, batch):
            loss, metrics = ModelLoss()(model, batch)
            calls.append(batch["input_ids"].shape[0])
            return loss * 0.5, {"full_loss": loss.detach()}

    trainer = Trainer(
        tiny_mlm(),
        toy_examples(64),
        ToyCollator(),
        TrainingConfig(max_steps=2, batch_size=8, gradient_accumulation_steps=2, progress=False),
        objective=HalfLoss(),
    )
    history = trainer.train()
    assert calls == [8, 8, 8, 8]  # 2 steps x 2 micro-batches
    assert history[-1]["train_loss"] == pytest.approx(history[-1]["train_full_loss"] * 0.5)


def test_time_budget_stops_the_run_and_decays_the_lr(monkeypatch):
    import itertools
    import time

    clock = itertools.count(0.0, 0.25)  # a fake clock: every reading is 0.25 s later
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock))
    trainer = make_trainer(steps=None, max_minutes=0.1, warmup=0.1, log_every=1)
    history = trainer.train()
    assert trainer.stop_reason == "time" and trainer.elapsed_s >= 6.0
    lrs = [r["lr"] for r in history]
    peak = lrs.index(max(lrs))
    assert 0 < peak < len(lrs) // 2  # warmup, then ...
    assert all(a >= b for a, b in zip(lrs[peak:], lrs[peak + 1 :]))  # ... decay with the clock
    assert lrs[-1] <= 0.11 * max(lrs)


# --- nothing lost -------------------------------------------------------------------------------


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_resume_ends_with_bitwise_identical_weights(tmp_path):
    overrides = dict(steps=6, gradient_accumulation_steps=2, output_dir=str(tmp_path / "run"))
    full = make_trainer(tiny_mlm(seed=1), **overrides)  # dropout 0.1: RNG must line up too
    full.train()

    first = make_trainer(tiny_mlm(seed=1), **overrides)
    first.callbacks.append(lambda t, r: t.request_stop() if t.step == 3 else None)
    first.train()
    assert (
        first.stop_reason == "requested"
        and read_state(tmp_path / "run" / "checkpoint")["step"] == 3
    )

    second = make_trainer(tiny_mlm(seed=99), **overrides)  # different init: all must come from disk
    second.resume(tmp_path / "run" / "checkpoint")
    assert second.step == 3 and [r["step"] for r in second.history] == [1, 2, 3]
    second.train()
    assert second.step == 6
    for name, value in _weights(full.model).items():
        assert torch.equal(value, second.model.state_dict()[name]), name
    full_opt, second_opt = full.optimizer.state_dict(), second.optimizer.state_dict()
    for index, state in full_opt["state"].items():
        for key, value in state.items():
            assert torch.equal(value, second_opt["state"][index][key]), (index, key)
    assert [r["train_loss"] for r in full.history] == [r["train_loss"] for r in second.history]


def test_resume_refuses_a_different_training_set(tmp_path):
    trainer = make_trainer(steps=1, output_dir=str(tmp_path))
    trainer.train()
    other = make_trainer(steps=2, examples=toy_examples(80))
    with pytest.raises(ValueError, match="trained on 64 examples"):
        other.resume(tmp_path / "checkpoint")


def test_nan_loss_stops_with_a_clear_message_and_keeps_the_last_good_checkpoint(tmp_path):
    class NanAtStep4:
        def __init__(self):
            self.trainer = None

        def __call__(self, model, batch):
            loss, metrics = ModelLoss()(model, batch)
            return (loss * float("nan") if self.trainer.step == 3 else loss), metrics

    objective = NanAtStep4()
    trainer = Trainer(
        tiny_mlm(),
        toy_examples(64),
        ToyCollator(),
        TrainingConfig(
            max_steps=10, batch_size=8, checkpoint_every=1, output_dir=str(tmp_path), progress=False
        ),
        objective=objective,
    )
    objective.trainer = trainer
    with pytest.raises(TrainingDiverged, match=r"loss became nan at step 4.*last good checkpoint"):
        trainer.train()
    checkpoint = tmp_path / "checkpoint"
    assert read_state(checkpoint)["step"] == 3
    # The NaN step did not touch the weights: the model still equals the step-3 checkpoint.
    fresh = tiny_mlm(seed=5)
    from course_lib.training import load_checkpoint

    load_checkpoint(checkpoint, fresh)
    for name, value in trainer.model.state_dict().items():
        assert torch.isfinite(value).all() and torch.equal(value, fresh.state_dict()[name]), name


SIGNAL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    import torch
    torch.set_num_threads(1)
    from training_helpers import ToyCollator, tiny_mlm, toy_examples
    from course_lib.training import Trainer, TrainingConfig

    def report(trainer, record):
        print("step", trainer.step, flush=True)
        if trainer.step >= 3:
            time.sleep(0.3)  # leave the test time to send its signal mid-run

    trainer = Trainer(
        tiny_mlm(seed=1), toy_examples(64), ToyCollator(),
        TrainingConfig(max_steps=40, batch_size=8, lr=3e-3, log_every=1, progress=False,
                       precision="fp32", output_dir={out!r}),
        eval_dataset=toy_examples(32, seed=1), callbacks=[report],
    )
    trainer.train()
    print("stopped", trainer.stop_reason, trainer.step, flush=True)
    """
)


def test_sigint_from_another_process_saves_then_resume_matches_exactly(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SIGNAL_SCRIPT.format(tests=str(TESTS_DIR), out=str(tmp_path / "run")))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    for line in proc.stdout:
        if line.strip() == "step 3":
            proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
            break
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    stopped = [line for line in out.splitlines() if line.startswith("stopped")]
    assert stopped and stopped[0].startswith("stopped SIGINT"), out
    step = int(stopped[0].split()[-1])
    assert 3 <= step < 40
    state = read_state(tmp_path / "run" / "checkpoint")
    assert state["step"] == step and state["stop_reason"] == "SIGINT"
    # Resuming from the signal's checkpoint matches an uninterrupted run, bit for bit.
    resumed = make_trainer(tiny_mlm(seed=7), steps=40)  # same schedule as the interrupted run
    resumed.resume(tmp_path / "run" / "checkpoint")
    resumed.callbacks.append(lambda t, r: t.request_stop() if t.step == step + 2 else None)
    resumed.train()
    full = make_trainer(tiny_mlm(seed=1), steps=40)
    full.callbacks.append(lambda t, r: t.request_stop() if t.step == step + 2 else None)
    full.train()
    for name, value in full.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name


def test_sigterm_stops_after_the_current_step_and_saves(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    trainer = make_trainer(steps=20, output_dir=str(tmp_path))
    trainer.callbacks.append(
        lambda t, r: os.kill(os.getpid(), signal.SIGTERM) if t.step == 2 else None
    )
    trainer.train()
    assert trainer.stop_reason == "SIGTERM" and trainer.step == 2
    assert read_state(tmp_path / "checkpoint")["step"] == 2
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is only there during train()


def test_a_second_ctrl_c_interrupts_at_once():
    trainer = make_trainer(steps=20)

    def press_twice(t, record):
        if t.step == 2:
            os.kill(os.getpid(), signal.SIGINT)  # first: finish the step, save, stop
            os.kill(os.getpid(), signal.SIGINT)  # second: the default handler, at once

    trainer.callbacks.append(press_twice)
    # Python leaves SIGINT ignored when pytest itself starts with it ignored (`nohup ... &`,
    # a background job): install the interactive default so the test sees what a learner sees.
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            trainer.train()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)


def test_history_plots_in_one_call():
    import matplotlib

    matplotlib.use("Agg")
    trainer = make_trainer(steps=4, eval_every=2)
    trainer.train()
    figure = trainer.plot()
    titles = " ".join(ax.get_title().lower() + ax.get_ylabel().lower() for ax in figure.axes)
    assert len(figure.axes) >= 3 and "loss" in titles and "accuracy" in titles


def test_evaluate_without_masked_labels_says_which_collator_to_pass():
    from course_lib.training.engine import evaluate_pretraining

    def unmasked(examples, generator=None):
        batch = ToyCollator()(examples, generator=generator)
        batch.pop("labels")
        return batch

    with pytest.raises(ValueError, match="needs masked batches with 'labels'.*eval_collate_fn"):
        evaluate_pretraining(tiny_mlm(), toy_examples(4), unmasked)
