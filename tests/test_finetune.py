"""Fine-tuning on the course's Trainer: loading a pretrained encoder into task models, padding
task batches, span decoding and scores, and learning toy tasks (seconds, tiny models)."""

import random

import pytest
import torch
from torch import nn

from course_lib import BertConfig, RobertaConfig
from course_lib.data.tasks import Task
from course_lib.models import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    RobertaForTokenClassification,
)
from course_lib.models.outputs import ModelOutput
from course_lib.training import TrainingConfig, save_checkpoint
from course_lib.training.finetune import (
    TaskCollator,
    TaskLoss,
    best_span,
    evaluate_task,
    finetune,
    load_backbone,
    predict,
    span_f1,
    task_model,
    task_model_class,
)

PAD, CLS, SEP = 0, 1, 2
VOCAB = 64


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_config(**changes) -> BertConfig:
    sizes = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        pre_layer_norm=True,
    )
    sizes.update(changes)
    return BertConfig(**sizes)


def pretrained_mlm(seed=1) -> BertForMaskedLM:
    """Stands in for a pretrained encoder: weights unlike any fresh initialisation."""
    torch.manual_seed(seed)
    model = BertForMaskedLM(tiny_config())
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


# ----- toy tasks: learnable in a few dozen steps ---------------------------------------------


def toy_sequences(n, seed, length=(4, 10)):
    rng = random.Random(seed)
    return [[rng.randrange(5, VOCAB) for _ in range(rng.randint(*length))] for _ in range(n)]


def contains_seven(n, seed):
    """Classification: does the sequence contain token 7? (about half do)"""
    rng = random.Random(seed + 100)
    out = []
    for ids in toy_sequences(n, seed):
        ids = [t for t in ids if t != 7]
        if rng.random() < 0.5:
            ids[rng.randrange(len(ids))] = 7
        out.append({"input_ids": [CLS, *ids, SEP], "labels": int(7 in ids)})
    return out


def token_mod_three(n, seed):
    """Tagging: each token's label is its id mod 3; specials are not scored."""
    return [
        {"input_ids": [CLS, *ids, SEP], "labels": [-100, *(t % 3 for t in ids), -100]}
        for ids in toy_sequences(n, seed)
    ]


def answer_between_markers(n, seed):
    """QA: the answer runs from marker token 3 to marker token 4 (1 to 4 tokens) in the context."""
    rng = random.Random(seed)
    out = []
    for ids in toy_sequences(n, seed, length=(6, 12)):
        question = [5, 6]
        k = rng.randrange(len(ids) - 3)
        length = rng.randint(1, 4) if k + 4 <= len(ids) else 1
        ids[k], ids[k + length - 1] = 3, 4
        start = len(question) + 2 + k  # [CLS] q [SEP], then the context
        input_ids = [CLS, *question, SEP, *ids, SEP]
        out.append(
            {
                "input_ids": input_ids,
                "token_type_ids": [0] * (len(question) + 2) + [1] * (len(ids) + 1),
                "start_positions": start,
                "end_positions": start + length - 1,
                "context_start": len(question) + 2,
                "context_end": len(input_ids) - 1,
            }
        )
    return out


def toy_task(kind, n_train=256, n_test=128):
    make = {
        "classification": contains_seven,
        "tagging": token_mod_three,
        "qa": answer_between_markers,
    }[kind]
    labels = {"classification": ("no", "yes"), "tagging": ("0", "1", "2"), "qa": ()}[kind]
    return Task(f"toy-{kind}", kind, make(n_train, 0), make(n_test, 1), labels, PAD)


def config(**changes) -> TrainingConfig:
    values = dict(
        max_steps=60,
        batch_size=16,
        lr=3e-3,
        warmup=0.1,
        log_every=10,
        progress=False,
        precision="fp32",
        device="cpu",
    )
    values.update(changes)
    return TrainingConfig(**values)


# ----- model classes and loading a pretrained encoder ------------------------------------------


def test_task_model_class_follows_the_family():
    assert task_model_class("classification", tiny_config()) is BertForSequenceClassification
    assert task_model_class("tagging", tiny_config()) is BertForTokenClassification
    assert task_model_class("qa", tiny_config()) is BertForQuestionAnswering
    roberta = RobertaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=40,
    )
    assert task_model_class("tagging", roberta) is RobertaForTokenClassification
    with pytest.raises(ValueError, match="kind"):
        task_model_class("regression", tiny_config())


def test_load_backbone_copies_every_encoder_tensor_and_reports_the_rest():
    source = pretrained_mlm()
    model = BertForSequenceClassification(tiny_config(num_labels=3))
    report = load_backbone(model, source)
    target = model.backbone.state_dict()
    for name, tensor in source.backbone.state_dict().items():
        assert torch.equal(target[name], tensor), name
    assert len(report.loaded) == len(source.backbone.state_dict())
    # BertForMaskedLM has no pooler: the classifier's pooler starts from scratch, like the head
    assert sorted(report.initialised) == sorted(
        [
            "backbone.pooler.dense.weight",
            "backbone.pooler.dense.bias",
            "classifier.out_proj.weight",
            "classifier.out_proj.bias",
        ]
    )
    assert report.unused and all(n.startswith("mlm_head.") for n in report.unused)
    assert "newly initialised" in str(report)
    # copies, not shared tensors: fine-tuning leaves the pretrained model alone
    with torch.no_grad():
        model.backbone.embeddings.word_embeddings.weight.zero_()
    assert source.backbone.embeddings.word_embeddings.weight.abs().sum() > 0


def test_a_pretraining_models_pooler_is_kept():
    torch.manual_seed(0)
    source = BertForPreTraining(tiny_config())
    model = BertForSequenceClassification(tiny_config())
    report = load_backbone(model, source)
    assert "backbone.pooler.dense.weight" in report.loaded
    assert torch.equal(model.backbone.pooler.dense.weight, source.backbone.pooler.dense.weight)
    assert "nsp_head.classifier.weight" in report.unused


def test_loaded_encoder_computes_what_the_pretrained_encoder_computes():
    source = pretrained_mlm()
    model = task_model("tagging", source, num_labels=3).eval()
    ids = torch.tensor([[CLS, 9, 17, 33, SEP, PAD]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]])
    with torch.no_grad():
        expected = source(input_ids=ids, attention_mask=mask).last_hidden_state
        got = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.equal(got, expected)


def test_load_backbone_from_a_checkpoint_directory(tmp_path):
    source = pretrained_mlm()
    save_checkpoint(tmp_path / "ckpt", source)
    model = task_model("qa", tmp_path / "ckpt")
    assert isinstance(model, BertForQuestionAnswering)
    for name, tensor in source.backbone.state_dict().items():
        assert torch.equal(model.backbone.state_dict()[name], tensor), name


def test_mismatched_architectures_are_refused_by_name():
    source = pretrained_mlm()
    with pytest.raises(ValueError, match="hidden_size"):
        load_backbone(BertForTokenClassification(tiny_config(hidden_size=64)), source)
    with pytest.raises(ValueError, match="pre_layer_norm"):
        load_backbone(BertForTokenClassification(tiny_config(pre_layer_norm=False)), source)
    # labels and dropout are the fine-tuner's to choose
    load_backbone(
        BertForTokenClassification(tiny_config(num_labels=7, hidden_dropout_prob=0.3)), source
    )
    with pytest.raises(TypeError, match="backbone"):
        load_backbone(BertForTokenClassification(tiny_config()), nn.Linear(2, 2))
    with pytest.raises(TypeError, match="checkpoint directory"):
        task_model("qa", 42)


def test_task_model_from_a_config_is_random_and_seeded():
    a = task_model("classification", tiny_config(), num_labels=4, seed=3)
    b = task_model("classification", tiny_config(), num_labels=4, seed=3)
    c = task_model("classification", tiny_config(), num_labels=4, seed=4)
    assert a.config.num_labels == 4 and a.classifier.out_proj.out_features == 4
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(
        a.backbone.embeddings.word_embeddings.weight, c.backbone.embeddings.word_embeddings.weight
    )
    pretrained = task_model("classification", pretrained_mlm(), num_labels=4, seed=3)
    # same seed, same head: only the encoder differs between the two arms of a comparison
    assert torch.equal(pretrained.classifier.out_proj.weight, a.classifier.out_proj.weight)


# ----- batches ------------------------------------------------------------------------------------


def test_collator_pads_each_kind_of_label():
    collate = TaskCollator(pad_token_id=PAD)
    batch = collate(
        [
            {"input_ids": [1, 9, 2], "labels": [-100, 1, -100], "words": ["x"]},
            {"input_ids": [1, 9, 9, 9, 2], "labels": [-100, 0, 2, 1, -100]},
        ],
        generator=torch.Generator(),
    )
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    assert batch["input_ids"].tolist() == [[1, 9, 2, PAD, PAD], [1, 9, 9, 9, 2]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1] * 5]
    assert batch["labels"].tolist() == [[-100, 1, -100, -100, -100], [-100, 0, 2, 1, -100]]
    qa = collate(answer_between_markers(3, 0))
    assert qa["start_positions"].shape == (3,) and qa["token_type_ids"].sum() > 0
    seq = collate(contains_seven(4, 0))
    assert seq["labels"].dtype == torch.long and seq["labels"].shape == (4,)


def test_collator_errors():
    collate = TaskCollator(PAD)
    with pytest.raises(ValueError, match="empty"):
        collate([])
    with pytest.raises(ValueError, match="Only some"):
        collate([{"input_ids": [1, 2], "labels": 0}, {"input_ids": [1, 2]}])
    with pytest.raises(ValueError, match="input_ids"):
        collate([{"labels": 0}])


def test_task_loss_is_the_models_loss_and_logs_batch_accuracy():
    torch.manual_seed(0)
    model = BertForTokenClassification(tiny_config(num_labels=3)).eval()
    batch = TaskCollator(PAD)(token_mod_three(8, 0))
    loss, metrics = TaskLoss()(model, batch)
    assert torch.equal(loss, model(**batch).loss)
    logits = model(**batch).logits
    scored = batch["labels"] != -100
    expected = (logits.argmax(-1)[scored] == batch["labels"][scored]).float().mean()
    assert metrics["accuracy"] == pytest.approx(expected.item())
    with pytest.raises(ValueError, match="no labels"):
        TaskLoss()(model, {k: v for k, v in batch.items() if k != "labels"})


# ----- decoding and scores ------------------------------------------------------------------------


def test_best_span_respects_order_length_and_context():
    start = torch.tensor([0.0, 9.0, 1.0, 0.0, 5.0, 0.0])
    end = torch.tensor([8.0, 0.0, 0.0, 2.0, 0.0, 3.0])
    assert best_span(start, end, 0, 6) == (1, 5)  # 9 + 3 beats 0 + 8 at (0, 0)
    assert best_span(start, end, 0, 1) == (0, 0)  # the context is position 0 alone
    assert best_span(start, end, 1, 6, max_answer_tokens=3) == (1, 3)  # 9 + 2
    assert best_span(start, end, 4, 6) == (4, 5)
    with pytest.raises(ValueError, match="empty"):
        best_span(start, end, 3, 3)


def test_span_f1():
    assert span_f1((3, 5), (3, 5)) == 1.0
    assert span_f1((1, 2), (4, 5)) == 0.0
    assert span_f1((2, 5), (4, 5)) == pytest.approx(2 * 0.5 * 1.0 / 1.5)


class FixedQA(nn.Module):
    """A fake QA model that puts its logits where it is told (to test the scoring alone)."""

    def __init__(self, spans):
        super().__init__()
        self.spans, self.weight = spans, nn.Parameter(torch.zeros(1))
        self.calls = 0

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        start = torch.full(input_ids.shape, -10.0)
        end = torch.full(input_ids.shape, -10.0)
        for i in range(input_ids.shape[0]):
            s, e = self.spans[self.calls + i]
            start[i, s], end[i, e] = 10.0, 10.0
        self.calls += input_ids.shape[0]
        return ModelOutput(start_logits=start, end_logits=end)


FixedQA.__name__ = "FixedForQuestionAnswering"


def test_evaluate_qa_exact_match_and_f1():
    examples = answer_between_markers(4, 0)
    gold = [(e["start_positions"], e["end_positions"]) for e in examples]
    guesses = [gold[0], (gold[1][0], gold[1][0]), gold[2], (gold[3][0] + 1, gold[3][1] + 1)]
    scores = evaluate_task(FixedQA(guesses), examples, batch_size=3)
    assert scores["exact_match"] == pytest.approx(2 / 4)
    expected_f1 = (1 + span_f1(guesses[1], gold[1]) + 1 + span_f1(guesses[3], gold[3])) / 4
    assert scores["f1"] == pytest.approx(expected_f1)


def test_evaluate_tagging_scores_only_labelled_tokens():
    torch.manual_seed(0)
    model = BertForTokenClassification(tiny_config(num_labels=3)).eval()
    examples = token_mod_three(10, 0)
    tags = predict(model, examples)
    assert [len(t) for t in tags] == [len(e["input_ids"]) for e in examples]
    pairs = [
        (t, lab) for p, e in zip(tags, examples) for t, lab in zip(p, e["labels"]) if lab != -100
    ]
    expected = sum(t == lab for t, lab in pairs) / len(pairs)
    assert evaluate_task(model, examples)["accuracy"] == pytest.approx(expected)
    with pytest.raises(ValueError, match="No examples"):
        evaluate_task(model, [])
    with pytest.raises(TypeError, match="not a task model"):
        evaluate_task(pretrained_mlm(), examples)


# ----- fine-tuning runs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, metric, floor",
    [("classification", "eval_accuracy", 0.9), ("tagging", "eval_accuracy", 0.95)],
)
def test_finetune_learns_a_toy_task(kind, metric, floor):
    task = toy_task(kind)
    model = task_model(kind, tiny_config(), num_labels=task.num_labels, seed=0)
    before = evaluate_task(model, task.test)["accuracy"]
    result = finetune(model, task, config(max_steps=80), eval_every=40)
    assert before < 0.7 and result.metrics[metric] > floor
    evaluated = [r["step"] for r in result.history if metric in r]
    assert evaluated == [40, 80]
    assert result.metrics[metric] == pytest.approx(evaluate_task(model, task.test)["accuracy"])


def test_finetune_qa_learns_to_point_at_the_span():
    task = toy_task("qa")
    model = task_model("qa", tiny_config(), seed=0)
    result = finetune(model, task, config(max_steps=40), eval_every=None)
    assert set(result.metrics) == {"eval_exact_match", "eval_f1"}
    assert result.metrics["eval_exact_match"] > 0.8  # chance is about 1 in 30 spans
    assert any("train_accuracy" in r for r in result.history)


def test_finetune_refuses_a_model_for_another_kind_of_task():
    with pytest.raises(ValueError, match="cannot learn a tagging task"):
        finetune(task_model("qa", tiny_config()), toy_task("tagging"), config())
