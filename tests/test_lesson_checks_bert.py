"""Chapter 01's lesson build checks: each fails on its stub with the todo, names typical wrong
answers (one right only at typical sizes) with its specific message, and accepts the master's
answer (exec'd from chapters/01_bert/instructor/)."""

from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F
from lesson_masters import master_answer
from tokenizers import models

from course_lib.exercises import lessons_bert as L
from course_lib.exercises.build import BuildCheck
from course_lib.labels import IGNORE_INDEX
from course_lib.labs import bert as bert_labs
from course_lib.modules.attention import scaled_dot_product_attention

CH = "01_bert"


def stub(*args, **kwargs):
    raise NotImplementedError()


def run(check: BuildCheck, candidate, capsys) -> tuple[object, str]:
    returned = check(candidate)
    return returned, capsys.readouterr().out


def assert_rejected(check: BuildCheck, candidate, message: str, capsys) -> None:
    returned, out = run(check, candidate, capsys)
    assert returned is check.fallback, out
    assert out.startswith("✗ "), out
    assert message in out, out
    assert check.fallback_name in out


def assert_accepted(check: BuildCheck, candidate, capsys) -> None:
    returned, out = run(check, candidate, capsys)
    assert returned is candidate, out
    assert out.startswith("✓ Correct!"), out


ALL = [getattr(L, name) for name in dir(L) if name.startswith("check_")]


@pytest.mark.parametrize("check", ALL, ids=lambda c: c.fallback_name[:40])
def test_the_stub_is_not_written_yet_and_the_fallback_passes(check, capsys):
    returned, out = run(check, stub, capsys)
    assert returned is check.fallback
    assert out == check.stub_output("stub")
    assert out.startswith("· Not written yet: `stub` — " + check.todo)
    assert check.probe(check.fallback)


# ----- 01/01 wordpiece -----------------------------------------------------------------------------


def test_the_reference_wordpiece_is_the_tokenizers_librarys():
    vocab = {piece: i for i, piece in enumerate(L._WP_VOCAB)}
    model = models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100)
    for _, word, unk in L._WP_CASES:
        if unk == "[UNK]":
            assert [t.value for t in model.tokenize(word)] == L.wordpiece(word, vocab), word


def wordpiece_with(shortest_first=False, partial_unk=False, no_hashes=False, hard_unk=False):
    def wordpiece(word, vocab, unk="[UNK]"):
        pieces, start = [], 0
        while start < len(word):
            ends = (
                range(start + 1, len(word) + 1) if shortest_first else range(len(word), start, -1)
            )
            for end in ends:
                piece = word[start:end] if (start == 0 or no_hashes) else "##" + word[start:end]
                if piece in vocab:
                    break
            else:
                if partial_unk:
                    return pieces + [unk]
                return ["[UNK]" if hard_unk else unk]
            pieces.append(piece)
            start = end
        return pieces

    return wordpiece


@pytest.mark.parametrize(
    "wrong, message",
    [
        (wordpiece_with(shortest_first=True), "take the LONGEST entry that fits first"),
        (wordpiece_with(partial_unk=True), "the WHOLE word becomes '[UNK]'"),
        (wordpiece_with(no_hashes=True), "look it up with '##' in front"),
        # right for every word of the default unknown token:
        (wordpiece_with(hard_unk=True), "use the `unk` argument"),
    ],
)
def test_wordpiece_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_wordpiece, wrong, message, capsys)


def test_wordpiece_accepts_the_master(capsys):
    assert_accepted(
        L.check_wordpiece, master_answer(CH, "01_tokenization.ipynb", "wordpiece"), capsys
    )


# ----- 01/02 LayerNorm, embeddings, attention, multi-head ------------------------------------------


def layer_norm_with(unbiased=False, eps_outside=False, affine=True):
    def layer_norm(x, norm):
        mean = x.mean(-1, keepdim=True)
        if eps_outside:
            y = (x - mean) / (x.std(-1, unbiased=False, keepdim=True) + norm.eps)
        else:
            y = (x - mean) / torch.sqrt(x.var(-1, keepdim=True, unbiased=unbiased) + norm.eps)
        return y * norm.weight + norm.bias if affine else y

    return layer_norm


@pytest.mark.parametrize(
    "wrong, message",
    [
        (layer_norm_with(unbiased=True), "divided by H - 1"),
        # right to 1e-4 at unit variance, wrong where the variance is near eps:
        (layer_norm_with(eps_outside=True), "eps goes INSIDE the square root"),
        (layer_norm_with(affine=False), "the learned scale and shift are missing"),
        (lambda x, norm: (x - x.mean(0)) / x.std(0), "normalise each vector over the LAST"),
    ],
)
def test_layer_norm_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_layer_norm, wrong, message, capsys)


def embeddings_with(segment="lookup", squeeze=False, norm=True, positions="arange"):
    def my_embeddings(input_ids, token_type_ids, tables):
        T = input_ids.shape[1]
        pos = torch.arange(T) if positions == "arange" else input_ids
        x = tables.word_embeddings(input_ids) + tables.position_embeddings(pos)
        seg = tables.token_type_embeddings.weight
        if segment == "lookup":
            x = x + tables.token_type_embeddings(token_type_ids)
        else:  # two rows assumed: row 0 plus type * (row 1 - row 0)
            x = x + seg[0] + token_type_ids[..., None] * (seg[1] - seg[0])
        x = tables.LayerNorm(x) if norm else x
        return x.squeeze() if squeeze else x

    return my_embeddings


@pytest.mark.parametrize(
    "wrong, message",
    [
        (embeddings_with(segment="interpolate"), "segment vectors are interpolated"),
        (embeddings_with(squeeze=True), ".squeeze() dropped a dimension of size 1"),
        (embeddings_with(norm=False), "the LayerNorm is missing"),
        (embeddings_with(positions="ids"), "positions are looked up by token id"),
    ],
)
def test_embeddings_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_embeddings, wrong, message, capsys)


def attention_with(softmax="torch", mask_rows="as given", squeeze=False, scale=True):
    def attention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1)
        if scale:
            scores = scores / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores + (mask[..., :1, :] if mask_rows == "first" else mask)
        if softmax == "torch":
            weights = scores.softmax(-1)
        else:  # exp / sum without subtracting the row maximum
            e = scores.exp()
            weights = e / e.sum(-1, keepdim=True)
        out = weights @ v
        return (out.squeeze(), weights.squeeze()) if squeeze else (out, weights)

    return attention


@pytest.mark.parametrize(
    "wrong, message",
    [
        (attention_with(softmax="exp"), "exp() of a large score overflows"),
        (attention_with(mask_rows="first"), "every query used the FIRST query's mask row"),
        (attention_with(squeeze=True), ".squeeze() dropped a dimension of size 1"),
        (attention_with(scale=False), "the scores are not scaled"),
        (lambda q, k, v, mask=None: attention_with()(q, k, v)[::-1], "swapped"),
    ],
)
def test_attention_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_attention, wrong, message, capsys)


def test_attention_names_an_input_changed_in_place(capsys):
    def in_place(q, k, v, mask=None):
        q /= math.sqrt(q.shape[-1])
        return attention_with(scale=False)(q, k, v, mask)

    assert_rejected(L.check_attention, in_place, "an input was modified in place", capsys)


def mha_with(split="transpose", scale="head", merge="transpose"):
    def multi_head_attention(x, w, num_heads, mask=None):
        b, t, h = x.shape
        hs = h // num_heads

        def project(name):
            y = x @ w[f"{name}.weight"].T + w[f"{name}.bias"]
            if split == "view":  # (B, nh, T, hs) straight from (B, T, H): mixes tokens and heads
                return y.view(b, num_heads, t, hs)
            return y.view(b, t, num_heads, hs).transpose(1, 2)

        q, k, v = project("query"), project("key"), project("value")
        scores = q @ k.transpose(-2, -1) / math.sqrt(hs if scale == "head" else h)
        if mask is not None:
            scores = scores + mask
        weights = scores.softmax(-1)
        out = weights @ v
        out = out.transpose(1, 2).reshape(b, t, h) if merge == "transpose" else out.reshape(b, t, h)
        return out @ w["output.weight"].T + w["output.bias"], weights

    return multi_head_attention


@pytest.mark.parametrize(
    "wrong, message",
    [
        (mha_with(split="view"), "cut the H features into heads"),
        (mha_with(scale="hidden"), "scale by sqrt(hs), the HEAD size"),
        (mha_with(merge="reshape"), "move the heads back next to each other"),
    ],
)
def test_multi_head_attention_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_multi_head_attention, wrong, message, capsys)


def test_multi_head_attention_wrong_only_beyond_one_head_is_caught_at_more_heads(capsys):
    """Splitting without the transpose is right with one head only: the 4-head case names it."""
    returned, out = run(L.check_multi_head_attention, mha_with(split="view"), capsys)
    assert "4 heads" in out


def test_lesson_02_masters_are_accepted(capsys):
    nb = "02_embeddings_and_attention.ipynb"
    assert_accepted(L.check_layer_norm, master_answer(CH, nb, "layer_norm"), capsys)
    assert_accepted(L.check_embeddings, master_answer(CH, nb, "my_embeddings"), capsys)
    assert_accepted(L.check_attention, master_answer(CH, nb, "attention"), capsys)
    mha = master_answer(CH, nb, "multi_head_attention", attention=scaled_dot_product_attention)
    assert_accepted(L.check_multi_head_attention, mha, capsys)


# ----- 01/03 MiniLayer ------------------------------------------------------------------------------


def mini_layer_with(order="post", act=F.gelu, mask_kind="additive"):
    class MiniLayer(L.MiniLayerReference):
        def forward(self, x, mask):
            b, t, h = x.shape

            def split(y):
                return y.view(b, t, self.heads, h // self.heads).transpose(1, 2)

            def attend(y):
                q, k, v = split(self.query(y)), split(self.key(y)), split(self.value(y))
                scores = q @ k.transpose(-2, -1) / math.sqrt(h // self.heads)
                if mask_kind == "additive":
                    scores = scores + mask
                else:  # -inf where the mask is negative: NaN for a row of padding only
                    scores = scores.masked_fill(mask < 0, float("-inf"))
                ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, h)
                return self.output(ctx)

            if order == "pre":
                x = x + attend(self.attention_norm(x))
                return x + self.down(act(self.up(self.output_norm(x))))
            x = self.attention_norm(x + attend(x))
            return self.output_norm(x + self.down(act(self.up(x))))

    return MiniLayer


@pytest.mark.parametrize(
    "wrong, message",
    [
        (mini_layer_with(order="pre"), "this is pre-LN"),
        (mini_layer_with(act=F.relu), "differs from the library's EncoderLayer"),
        # right on every batch with at least one real token per row:
        (mini_layer_with(mask_kind="-inf"), "for the row of padding only"),
    ],
)
def test_mini_layer_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_mini_layer, wrong, message, capsys)


def test_mini_layer_names_renamed_parameters(capsys):
    class Renamed(L.MiniLayerReference):
        def __init__(self, c):
            super().__init__(c)
            self.ffn_in = self.up
            del self.up

    assert_rejected(L.check_mini_layer, Renamed, "keep the parameter names", capsys)


def test_mini_layer_accepts_the_master(capsys):
    answer = master_answer(CH, "03_whole_model.ipynb", "MiniLayer")
    assert_accepted(L.check_mini_layer, answer, capsys)


# ----- 01/04 masking and NSP ------------------------------------------------------------------------


def masking_with(in_place=False, p_fixed=None, last_id=True, swap=False):
    def my_mask_tokens(
        input_ids, special, mask_id, real_ids, generator, p=0.15, p_mask=0.8, p_random=0.1
    ):
        p = p if p_fixed is None else p_fixed
        B, T = input_ids.shape
        target = (torch.rand(B, T, generator=generator) < p) & ~special
        action = torch.rand(B, T, generator=generator)
        n = len(real_ids) if last_id else len(real_ids) - 1
        random_ids = real_ids[torch.randint(n, (B, T), generator=generator)]
        labels = torch.where(target, input_ids, -100)
        out = input_ids if in_place else input_ids.clone()
        out[target & (action < p_mask)] = mask_id
        rnd = target & (action >= p_mask) & (action < p_mask + p_random)
        out[rnd] = random_ids[rnd]
        return (labels, out) if swap else (out, labels)

    return my_mask_tokens


@pytest.mark.parametrize(
    "wrong, message",
    [
        (masking_with(in_place=True), "`input_ids` was modified in place"),
        # right at the default rates:
        (masking_with(p_fixed=0.15), "use the `p` argument"),
        (masking_with(last_id=False), "the random replacements differ"),
        (masking_with(swap=True), "the two outputs are swapped"),
    ],
)
def test_mask_tokens_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_mask_tokens, wrong, message, capsys)


def test_mask_tokens_accepts_the_master(capsys):
    answer = master_answer(CH, "04_pretraining_objectives.ipynb", "my_mask_tokens")
    assert_accepted(L.check_mask_tokens, answer, capsys)


def nsp_with(other="others", types="right", label_flip=False, trim=True, rng_source="rng"):
    def my_nsp_examples(docs, budget, rng, cls_id, sep_id, short_prob=0.1):
        r = rng if rng_source == "rng" else random.Random()
        examples = []
        for d, doc in enumerate(docs):
            i = 0
            while i < len(doc) - 1:
                goal = r.randint(2, budget) if r.random() < short_prob else budget
                j, length = i, 0
                while j < len(doc) and (length < goal or j - i < 2):
                    length, j = length + len(doc[j]), j + 1
                a_end = r.randint(i + 1, j - 1)
                a = [t for s in doc[i:a_end] for t in s]
                if r.random() < 0.5:
                    pool = (
                        [k for k in range(len(docs)) if k != d]
                        if other == "others"
                        else range(len(docs))
                    )
                    o = docs[r.choice(list(pool))]
                    b = [t for s in o[r.randrange(len(o)) :] for t in s][: max(goal - len(a), 1)]
                    label, i = 1, a_end
                else:
                    b = [t for s in doc[a_end:j] for t in s]
                    label, i = 0, j
                while trim and len(a) + len(b) > budget:
                    (a if len(a) > len(b) else b).pop()
                tt = [0] * (len(a) + 2) + [1] * (len(b) + 1)
                if types == "sep-in-b":
                    tt = [0] * (len(a) + 1) + [1] * (len(b) + 2)
                examples.append({"input_ids": [cls_id, *a, sep_id, *b, sep_id], "token_type_ids": tt,
                                 "next_sentence_label": 1 - label if label_flip else label})  # fmt: skip
        r.shuffle(examples)
        return examples

    return my_nsp_examples


@pytest.mark.parametrize(
    "wrong, message",
    [
        # right whenever the draw avoids A's own document (most draws with many documents):
        (nsp_with(other="any"), "B comes from A's own document"),
        (nsp_with(types="sep-in-b"), "segment A (0) owns [CLS], A and the first [SEP]"),
        (nsp_with(label_flip=True), "label 0 is the real continuation"),
        (nsp_with(trim=False), "is longer than budget + 3"),
        (nsp_with(rng_source="global"), "draw every random choice from `rng`"),
    ],
)
def test_nsp_examples_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_nsp_examples, wrong, message, capsys)


def test_nsp_examples_accepts_the_master(capsys):
    answer = master_answer(CH, "04_pretraining_objectives.ipynb", "my_nsp_examples")
    assert_accepted(L.check_nsp_examples, answer, capsys)


# ----- 01/06 best span and pair packing -------------------------------------------------------------


def span_with(end_limit="inclusive", context_end="exclusive", max_len_offset=0):
    def best_span(start_logits, end_logits, max_answer_len, context_start, context_end_):
        hi = context_end_ + (1 if context_end == "inclusive" else 0)
        hi = min(hi, len(start_logits))
        best, best_score = None, float("-inf")
        for s in range(context_start, hi):
            top = s + max_answer_len + max_len_offset
            for e in range(s, min(top, hi)):
                score = float(start_logits[s] + end_logits[e])
                if score > best_score:
                    best, best_score = (s, e), score
        return best

    return best_span


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            lambda s, e, m, lo, hi: (int(s.argmax()), int(e.argmax())),
            "the two argmaxes taken separately",
        ),
        (span_with(context_end="inclusive"), "end exclusive"),
        (span_with(max_len_offset=1), "is longer than max_answer_len"),
        # right whenever the best span is shorter than the limit:
        (span_with(max_len_offset=-1), "spans of exactly max_answer_len tokens are allowed"),
    ],
)
def test_best_span_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_best_span, wrong, message, capsys)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            lambda a, b, c, s: ([c, *a, s, *b, s], [0] * (len(a) + 1) + [1] * (len(b) + 2)),
            "owns [CLS] and the FIRST [SEP]",
        ),
        (
            lambda a, b, c, s: ([2, *a, 3, *b, 3], L.pack_pair(a, b, c, s)[1]),
            "the cls_id and sep_id",
        ),
        (
            lambda a, b, c, s: ([c, *a, s, *b, s], [0] * (len(a) + 2) + [1] * len(b)),
            "one type per id",
        ),
    ],
)
def test_pack_pair_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_pack_pair, wrong, message, capsys)


def test_lesson_06_masters_are_accepted(capsys):
    nb = "06_fine_tuning.ipynb"
    assert_accepted(L.check_best_span, master_answer(CH, nb, "best_span"), capsys)
    assert_accepted(L.check_pack_pair, master_answer(CH, nb, "pack_pair"), capsys)


# ----- 01/08 the labs' languages --------------------------------------------------------------------


def pairs_with(order="ab", offset=bert_labs.N_SPECIAL):
    def my_sample_pairs(perm, batch, pairs, generator):
        b = torch.randint(0, len(perm), (batch, pairs), generator=generator)
        first, second = (perm[b], b) if order == "ab" else (b, perm[b])
        return torch.stack([first, second], dim=-1).reshape(batch, 2 * pairs) + offset

    return my_sample_pairs


@pytest.mark.parametrize(
    "wrong, message",
    [
        (pairs_with(order="ba"), "perm[b] comes first"),
        (pairs_with(offset=0), "content ids start at N_SPECIAL"),
        (lambda perm, batch, pairs, g: pairs_with()(perm, batch, pairs, None), "draw b as ONE"),
    ],
)
def test_sample_pairs_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_sample_pairs, wrong, message, capsys)


def tags_lesson_code(ids, word_class):
    """The lesson's first version: right for even lengths, a shape error at odd ones."""
    x = ids - bert_labs.N_SPECIAL
    tags = torch.full_like(ids, IGNORE_INDEX)
    tags[:, 1::2] = word_class[x[:, 0::2]]
    return tags


def tags_right_neighbour(ids, word_class):
    x = ids - bert_labs.N_SPECIAL
    tags = torch.full_like(ids, IGNORE_INDEX)
    n = tags[:, 1::2].shape[1]
    tags[:, 1::2] = word_class[x[:, 1::2][:, :n]]
    return tags


@pytest.mark.parametrize(
    "wrong, message",
    [
        (tags_lesson_code, "an odd length, 7"),
        (tags_right_neighbour, "word_class of the content index (id - N_SPECIAL) at i - 1"),
        (lambda ids, wc: wc[ids - bert_labs.N_SPECIAL], "even positions carry no tag"),
    ],
)
def test_tags_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_tags, wrong, message, capsys)


def test_lesson_08_masters_are_accepted(capsys):
    nb = "08_mechanism_labs.ipynb"
    found = master_answer(CH, nb, "my_sample_pairs", bert=bert_labs)
    assert_accepted(L.check_sample_pairs, found, capsys)
    found = master_answer(CH, nb, "my_tags", bert=bert_labs, IGNORE_INDEX=IGNORE_INDEX)
    assert_accepted(L.check_tags, found, capsys)


# ----- 01/04 the training loop ----------------------------------------------------------------------


def loop_with(**variant):
    def train_by_hand(model, batches, peak_lr, warmup, max_grad_norm, fused=False):
        return L.train_by_hand(model, batches, peak_lr, warmup, max_grad_norm, fused, **variant)

    return train_by_hand


@pytest.mark.parametrize(
    "wrong, message",
    [
        (loop_with(decay_all=True), "weight decay reaches the biases and LayerNorm gains"),
        (loop_with(lr_at=0.0), "evaluated at the START of each step"),
        (loop_with(clip="after"), "not clipped before the step"),
        (loop_with(zero_grad=False), "the gradients are never cleared"),
        (loop_with(betas=(0.9, 0.999)), "AdamW's betas are the default"),
    ],
)
def test_train_by_hand_names_the_mistake(wrong, message, capsys):
    assert_rejected(L.check_train_by_hand, wrong, message, capsys)


def test_train_by_hand_names_a_loop_that_clips_only_when_it_must_not(capsys):
    """Right while the gradient norm stays below the limit: clipping at 0.05 names it."""

    def clip_once(model, batches, peak_lr, warmup, max_grad_norm, fused=False):
        limit = max_grad_norm if max_grad_norm >= 1.0 else float("inf")
        return L.train_by_hand(model, batches, peak_lr, warmup, limit, fused)

    returned, out = run(L.check_train_by_hand, clip_once, capsys)
    assert returned is L.check_train_by_hand.fallback
    assert "clipping at 0.05" in out and "not clipped before the step" in out, out


def test_the_reference_loop_takes_the_engines_steps():
    """train_by_hand (the fallback and the probe's reference) equals the library's Trainer on
    the batches the Trainer builds (recorded by its collator, as notebook 04 does)."""
    import copy

    from course_lib.training import Trainer, TrainingConfig

    model, batches = L._train_case(0, 3)
    rows = [{k: v[i] for k, v in b.items()} for b in batches for i in range(4)]
    seen = []

    def collate(examples, generator=None):
        seen.append({k: torch.stack([e[k] for e in examples]) for k in examples[0]})
        return seen[-1]

    config = TrainingConfig(max_steps=3, batch_size=4, lr=1e-2, warmup=0.4, weight_decay=0.01,
                            betas=(0.9, 0.98), eps=1e-6, max_grad_norm=1.0, seed=0, log_every=1,
                            device="cpu", precision="fp32", progress=False)  # fmt: skip
    trainer = Trainer(copy.deepcopy(model), rows, collate, config)
    trainer.train()
    mine = copy.deepcopy(model).train()
    L.train_by_hand(mine, seen, 1e-2, 0.4, 1.0, trainer.optimizer.defaults.get("fused") or False)
    theirs = trainer.model.state_dict()
    assert max((mine.state_dict()[k] - theirs[k]).abs().max().item() for k in theirs) < 1e-6


def test_train_by_hand_accepts_the_master(capsys):
    answer = master_answer(CH, "04_pretraining_objectives.ipynb", "train_by_hand")
    assert_accepted(L.check_train_by_hand, answer, capsys)


@pytest.mark.parametrize("check", ALL, ids=lambda c: c.fallback_name[:40])
def test_a_check_leaves_the_global_random_state_as_it_was(check, capsys):
    """The cells after a check draw the same random numbers as without it (the notebook's
    printed results do not move)."""
    torch.manual_seed(123)
    random.seed(123)
    expected = (torch.rand(3), random.random())
    torch.manual_seed(123)
    random.seed(123)
    check(check.fallback)
    assert torch.equal(torch.rand(3), expected[0]) and random.random() == expected[1]
