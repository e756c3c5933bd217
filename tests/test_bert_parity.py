"""The proof of correctness: course_lib's BERT equals transformers' BERT, weight for weight.

Random-init transformers models are built from small configs (never downloaded), converted,
and compared on padded batches with two segments; then converted back, state dicts equal.
"""

import zlib

import pytest
import torch
import transformers
from parity import max_diff, padded_batch

from course_lib import from_transformers, to_transformers

CLASSES = [
    "BertModel",
    "BertForMaskedLM",
    "BertForPreTraining",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertForQuestionAnswering",
]
CONFIGS = {
    # name: (hidden, heads, layers, intermediate, activation) -- head sizes 12, 16, 8, 64
    "h48-heads4": (48, 4, 2, 37, "gelu"),
    "h64-heads4-relu": (64, 4, 3, 100, "relu"),
    "h40-heads5-gelu_new": (40, 5, 1, 64, "gelu_new"),
    "h128-heads2": (128, 2, 2, 256, "gelu"),
}
TOL = 1e-5


def hf_model(cls_name: str, dims, vocab=211, max_pos=40, num_labels=3):
    hidden, heads, layers, inter, act = dims
    config = transformers.BertConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_hidden_layers=layers,
        intermediate_size=inter,
        hidden_act=act,
        max_position_embeddings=max_pos,
        # transformers' QA head is Linear(hidden, num_labels) split into start/end: needs 2
        num_labels=2 if cls_name.endswith("QuestionAnswering") else num_labels,
        attn_implementation="eager",  # so transformers returns attention maps
    )
    # crc32, not hash(): str hashes are salted per process, so seeds would change every run
    torch.manual_seed(zlib.crc32(cls_name.encode()) % 1000)
    return getattr(transformers, cls_name)(config).eval()


@pytest.mark.parametrize("config_name", CONFIGS)
@pytest.mark.parametrize("cls_name", CLASSES)
def test_outputs_equal_transformers(cls_name, config_name):
    hf = hf_model(cls_name, CONFIGS[config_name])
    ours = from_transformers(hf)
    assert type(ours).__name__ == cls_name
    batch = padded_batch(211)
    with torch.no_grad():
        theirs = hf(**batch, output_attentions=True, output_hidden_states=True)
        mine = ours(**batch, output_attentions=True, output_hidden_states=True)
    real = batch["attention_mask"].bool()
    assert len(mine.hidden_states) == len(theirs.hidden_states)
    for a, b in zip(mine.hidden_states, theirs.hidden_states):
        assert max_diff(a[real], b[real]) < TOL
    assert len(mine.attentions) == len(theirs.attentions)
    for a, b in zip(mine.attentions, theirs.attentions):
        assert a.shape == b.shape
        assert max_diff(a, b) < TOL
    if cls_name == "BertModel":
        assert max_diff(mine.last_hidden_state[real], theirs.last_hidden_state[real]) < TOL
        assert max_diff(mine.pooler_output, theirs.pooler_output) < TOL
    elif cls_name == "BertForMaskedLM":
        assert mine.mlm_logits.shape == theirs.logits.shape
        assert max_diff(mine.mlm_logits, theirs.logits) < TOL
    elif cls_name == "BertForPreTraining":
        assert max_diff(mine.mlm_logits, theirs.prediction_logits) < TOL
        assert max_diff(mine.nsp_logits, theirs.seq_relationship_logits) < TOL
    elif cls_name == "BertForQuestionAnswering":
        assert max_diff(mine.start_logits, theirs.start_logits) < TOL
        assert max_diff(mine.end_logits, theirs.end_logits) < TOL
    else:
        assert max_diff(mine.logits, theirs.logits) < TOL


@pytest.mark.parametrize("cls_name", CLASSES)
def test_round_trip_state_dict_is_exact(cls_name):
    hf = hf_model(cls_name, CONFIGS["h48-heads4"])
    back = to_transformers(from_transformers(hf))
    assert type(back) is type(hf)
    a, b = hf.state_dict(), back.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_losses_equal_transformers():
    hf = hf_model("BertForPreTraining", CONFIGS["h48-heads4"])
    ours = from_transformers(hf)
    batch = padded_batch(211)
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, [1, 4, 7]] = batch["input_ids"][0, [1, 4, 7]]
    labels[2, 2] = 17
    nsp = torch.tensor([0, 1, 1])
    with torch.no_grad():
        theirs = hf(**batch, labels=labels, next_sentence_label=nsp)
        mine = ours(**batch, labels=labels, next_sentence_label=nsp)
    assert abs(mine.loss.item() - theirs.loss.item()) < TOL
    # with labels, only the 4 masked rows are projected onto the vocabulary
    assert mine.mlm_logits.shape == (4, 211)
    assert mine.mlm_positions.tolist() == [[0, 1], [0, 4], [0, 7], [2, 2]]
    full = hf(**batch).prediction_logits
    assert max_diff(mine.mlm_logits, full[labels != -100]) < TOL


@pytest.mark.parametrize(
    "cls_name, kwargs",
    [
        ("BertForSequenceClassification", {"labels": torch.tensor([0, 2, 1])}),
        ("BertForTokenClassification", {"labels": torch.randint(0, 3, (3, 13))}),
        (
            "BertForQuestionAnswering",
            {
                "start_positions": torch.tensor([1, 3, 20]),
                "end_positions": torch.tensor([2, 5, 20]),
            },
        ),
    ],
)
def test_task_losses_equal_transformers(cls_name, kwargs):
    hf = hf_model(cls_name, CONFIGS["h64-heads4-relu"])
    ours = from_transformers(hf)
    batch = padded_batch(211)
    with torch.no_grad():
        assert abs(ours(**batch, **kwargs).loss.item() - hf(**batch, **kwargs).loss.item()) < TOL


def test_training_mode_follows_source_and_weights_are_tied():
    hf = hf_model("BertForMaskedLM", CONFIGS["h48-heads4"]).train()
    ours = from_transformers(hf)
    assert ours.training
    emb = ours.backbone.embeddings.word_embeddings.weight
    assert ours.mlm_head.decoder.weight is emb
    with torch.no_grad():
        emb[3, 0] += 1.0  # one tensor: the decoder sees the change too
    assert ours.mlm_head.decoder.weight[3, 0] == emb[3, 0]


def test_unknown_class_is_a_clear_error():
    with pytest.raises(ValueError, match="no conversion for"):
        from_transformers(torch.nn.Linear(2, 2))


def test_checkpoint_directory_gives_same_fill_mask(tmp_path):
    """A learner's downloaded checkpoint is a directory; simulate one with save_pretrained."""
    hf = hf_model("BertForMaskedLM", CONFIGS["h64-heads4-relu"])
    hf.save_pretrained(tmp_path)
    reloaded = transformers.BertForMaskedLM.from_pretrained(tmp_path).eval()
    ours = from_transformers(reloaded)
    batch = padded_batch(211)
    with torch.no_grad():
        top_theirs = reloaded(**batch).logits.topk(5, dim=-1).indices
        top_ours = ours(**batch).mlm_logits.topk(5, dim=-1).indices
    assert torch.equal(top_theirs, top_ours)
