"""Mutation testing: plant small, realistic bugs in course_lib one at a time and check the tests
catch each one. Run before a release (not in CI: about half an hour on two cores).

    python tools/mutation.py                     # every mutant, results in docs/mutation-results.json
    python tools/mutation.py --list              # the mutants, and whether each snippet still applies
    python tools/mutation.py --only pairs-put-back,train-no-clip
    python tools/mutation.py --module data --tests tests/test_pairs.py

How it works: the committed tree (`git archive HEAD`, or the working tree with --worktree) is
copied to a temporary directory and every pytest run imports course_lib from that copy
(PYTHONPATH=<copy>/src first; checked before the first mutant), so the repository itself is never
touched. Each mutant replaces one exact snippet of one file, runs only the tests that should
notice (`-x -q`), and puts the file back. A mutant is *killed* when pytest fails, *survives* when
it passes. Each pytest run takes the shared CPU lock (/tmp/encoders-cpu.lock, the lock of
one-at-a-time) for itself only, so other heavy jobs interleave between mutants.

Mutants are hand-written (file, exact original snippet, replacement, description) so that each
one is a bug a person could plausibly write; a mutant whose snippet no longer occurs exactly once
is reported as `stale` (update it). A mutant that no test can kill because it computes the same
thing carries its reason in `equivalent` and is left out of the score. An established tool
(mutmut, cosmic-ray) can be run on the same copy later; this list is the curated core.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCK = os.environ.get("ONE_AT_A_TIME_LOCK", "/tmp/encoders-cpu.lock")
COPIED = ("src", "tests", "conftest.py", "pyproject.toml")


@dataclass(frozen=True)
class Mutant:
    id: str
    path: str  # relative to src/course_lib
    original: str  # must occur exactly once in the file
    replacement: str
    description: str
    tests: tuple[str, ...]  # pytest arguments: files, node ids, "-k", expressions
    equivalent: str = ""  # why no test can kill it (left out of the score)

    @property
    def module(self) -> str:
        """The area the score is reported by: objectives, data, modules, ..., counting."""
        return self.path.split("/")[0].removesuffix(".py")


GAPS = "tests/test_mutation_gaps.py"
T_MASK = ("tests/test_masking.py",)
T_COLLATOR = ("tests/test_collator.py",)
T_DISTIL = ("tests/test_distillation.py",)
T_PAIRS = (
    "tests/test_pairs.py",
    f"{GAPS}::test_nsp_segments_cover_every_sentence_when_nothing_is_truncated",
    f"{GAPS}::test_truncation_trims_the_front_sometimes_and_the_back_sometimes",
    f"{GAPS}::test_random_b_never_comes_from_a_s_own_document",
    f"{GAPS}::test_joined_sentences_keep_their_words_apart",
)
T_CORPUS = (
    "tests/test_corpus.py",
    "-k",
    "split_sentences or split_documents or clean_rst or load_text or content_hash",
)
T_MODULES = ("tests/test_bert_modules.py", "tests/test_bert_parity.py")
T_BERT = ("tests/test_bert_parity.py", "tests/test_bert_modules.py")
T_ALBERT = ("tests/test_albert.py",)
T_ROBERTA = ("tests/test_roberta.py",)
T_DISTILBERT = ("tests/test_distilbert.py",)
T_DEBERTA = ("tests/test_deberta.py", "tests/test_relative_position.py")
T_RELPOS = ("tests/test_relative_position.py", "tests/test_deberta.py")
T_COUNT = ("tests/test_counting.py", "tests/test_albert_counting.py")
T_EPS = (f"{GAPS}::test_a_non_default_layer_norm_eps_survives_conversion_both_ways",)
ENGINE = ("tests/test_engine.py", "-k", "not sigint and not plots")  # the two slow ones
T_ENGINE = (*ENGINE, f"{GAPS}::test_clipping_bounds_the_gradient_the_optimizer_sees")
T_RESUME = (*ENGINE, f"{GAPS}::test_resume_keeps_elapsed_time_and_the_minutes_schedule")
T_CKPT = (
    "tests/test_checkpoint.py",
    f"{GAPS}::test_load_checkpoint_restores_the_global_random_streams",
)


def m(id, path, original, replacement, description, tests, equivalent=""):  # noqa: A002
    return Mutant(id, path, original, replacement, description, tuple(tests), equivalent)


# One mutant per block of lines reads better than one argument per line.
# fmt: off
MUTANTS: list[Mutant] = [
    # --- objectives/masking.py --------------------------------------------------------------
    m("mask-specials", "objectives/masking.py",
      "selected = covered.gather(1, units) & ~special_tokens_mask",
      "selected = covered.gather(1, units)",
      "special tokens ([CLS], [SEP], padding) can be selected for prediction", T_MASK),
    m("mask-random-pool", "objectives/masking.py",
      "pool = non_special_ids.to(device)",
      "pool = torch.arange(vocab_size, device=device)",
      "random replacements may be special tokens or [MASK]", T_MASK),
    m("mask-whole-word-off", "objectives/masking.py",
      "units = _units(special_tokens_mask, word_ids if config.whole_word else None)",
      "units = _units(special_tokens_mask, None)",
      "whole_word=True silently masks single pieces", T_MASK),
    m("mask-word-starts", "objectives/masking.py",
      "starts |= special_tokens_mask | (word_ids < 0)",
      "starts |= special_tokens_mask",
      "tokens with word id -1 (no word) are joined into one unit",
      (*T_MASK, f"{GAPS}::test_tokens_without_a_word_are_masked_one_by_one")),
    m("mask-ngram-uniform", "objectives/masking.py",
      "weights = 1.0 / torch.arange(1, max_ngram + 1, dtype=torch.float64)",
      "weights = torch.ones(max_ngram, dtype=torch.float64)",
      "n-gram lengths uniform instead of P(n) proportional to 1/n", T_MASK),
    m("mask-span-cover-off-by-one", "objectives/masking.py",
      "covered |= starts[:, origin] & (lengths[:, origin] > k)",
      "covered |= starts[:, origin] & (lengths[:, origin] >= k)",
      "spans cover one unit too many", T_MASK),
    m("mask-span-rate-ignores-overlap", "objectives/masking.py",
      "low, high = (mid, high) if coverage(mid) < mlm_probability else (low, mid)",
      "low, high = (mid, high) if mid * sum(survive) < mlm_probability else (low, mid)",
      "span start rate from the expected length, ignoring overlaps (rate too low)", T_MASK),
    m("mask-8010-boundary", "objectives/masking.py",
      "& (action < config.mask_replace_prob + config.random_replace_prob)",
      "& (action < config.random_replace_prob)",
      "random replacement share wrong (80/10/10 becomes 80/0/20)", T_MASK),
    m("mask-validate-sum", "objectives/masking.py",
      "if self.mask_replace_prob + self.random_replace_prob > 1.0 + 1e-9:",
      "if self.mask_replace_prob > 1.0 + 1e-9:",
      "mask + random shares above 1 accepted", T_MASK),
    m("mask-banned-no-mask-token", "objectives/masking.py",
      "torch.tensor([mask_token_id], device=device)]",
      "torch.tensor([], dtype=input_ids.dtype, device=device)]",
      "default random pool may draw [MASK] itself", T_MASK),
    # --- objectives/distillation.py ---------------------------------------------------------
    m("distil-t-not-squared", "objectives/distillation.py",
      "return kl * temperature**2",
      "return kl * temperature",
      "KL term scaled by T instead of T^2", T_DISTIL),
    m("distil-kl-mean", "objectives/distillation.py",
      'log_target=True, reduction="batchmean")',
      'log_target=True, reduction="mean")',
      "KL averaged over vocabulary entries too (torch's 'mean' trap)", T_DISTIL),
    m("distil-teacher-unsoftened", "objectives/distillation.py",
      "log_p_teacher = F.log_softmax(teacher_logits.float() / temperature, dim=-1)",
      "log_p_teacher = F.log_softmax(teacher_logits.float(), dim=-1)",
      "teacher distribution not softened by T", T_DISTIL),
    m("distil-cos-on-padding", "objectives/distillation.py",
      "real = attention_mask.bool()",
      "real = torch.ones_like(attention_mask).bool()",
      "cosine loss averaged over padding too", T_DISTIL),
    m("distil-teacher-train-mode", "objectives/distillation.py",
      "self.teacher.eval()  # even if someone switched it back to training mode",
      "pass",
      "teacher left in training mode (dropout in the soft targets)", T_DISTIL),
    # --- data/pairs.py ----------------------------------------------------------------------
    m("pairs-truncate-one-end", "data/pairs.py",
      "index = 0 if rng.random() < 0.5 else -1",
      "index = -1",
      "truncation always trims the end (issue 23)", T_PAIRS),
    m("pairs-random-b-own-doc", "data/pairs.py",
      "return docs[(d + 1 + rng.randrange(len(docs) - 1)) % len(docs)]",
      "return docs[rng.randrange(len(docs))]",
      "NSP's random B may come from A's own document (issue 23)", T_PAIRS),
    m("pairs-put-back", "data/pairs.py",
      "put_back = len(chunk) - a_end",
      "put_back = 0",
      "NSP drops the unused real continuation instead of reading it again (issue 23)", T_PAIRS),
    m("pairs-truncate-always-a", "data/pairs.py",
      "longer = a if len(a[0]) > len(b[0]) else b",
      "longer = a if len(a[0]) >= 1 else b",
      "truncation trims A, not the longer segment", T_PAIRS),
    m("pairs-sop-label", "data/pairs.py",
      "sentence_order_label=int(swapped)",
      "sentence_order_label=int(not swapped)",
      "SOP labels inverted", T_PAIRS),
    m("pairs-short-seq-inverted", "data/pairs.py",
      "rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens",
      "rng.randint(2, max_tokens) if rng.random() >= short_seq_prob else max_tokens",
      "short targets 90% of the time instead of 10%", T_PAIRS),
    m("pairs-lone-last-sentence", "data/pairs.py",
      "if remaining == 0 or (length >= goal and len(chunk) >= 2 and remaining != 1):",
      "if remaining == 0 or (length >= goal and len(chunk) >= 2):",
      "a chunk may close leaving a lone last sentence", T_PAIRS),
    m("pairs-word-id-offset", "data/pairs.py",
      "offset += max(seg_words, default=-1) + 1",
      "offset += max(seg_words, default=-1)",
      "word ids of joined sentences collide (whole-word masking joins two words)", T_PAIRS),
    m("pairs-packed-drop-token", "data/pairs.py",
      "piece = (ids[start : start + budget], words[start : start + budget])",
      "piece = (ids[start : start + budget - 1], words[start : start + budget - 1])",
      "a long sentence split into pieces loses a token per piece", T_PAIRS),
    m("pairs-mlm-drop-last-block", "data/pairs.py",
      "for i in range(0, len(stream[0]), budget)",
      "for i in range(0, len(stream[0]) - budget, budget)",
      "the final partial MLM block is dropped", T_PAIRS),
    # --- data/collator.py -------------------------------------------------------------------
    m("collator-attention-on-padding", "data/collator.py",
      "attention_mask = pad_rows([[1] * len(r) for r in ids], width, 0)",
      "attention_mask = pad_rows([[1] * len(r) for r in ids], width, 1)",
      "padding gets attention_mask 1", T_COLLATOR),
    m("collator-static-labels-pad", "data/collator.py",
      '[_as_list(e["labels"]) for e in examples], width, IGNORE_INDEX',
      '[_as_list(e["labels"]) for e in examples], width, 0',
      "static masking pads labels with token 0 instead of -100", T_COLLATOR),
    m("collator-static-same-copies", "data/collator.py",
      "batch = collator(chunk, generator=generator)",
      "batch = collator(chunk, generator=torch.Generator().manual_seed(seed))",
      "every static copy gets the same masks", T_COLLATOR),
    m("collator-workers-same-seed", "data/collator.py",
      "mixed = (info.seed + self.seed * 0x9E3779B97F4A7C15) % (2**63) if info else self.seed",
      "mixed = self.seed",
      "every DataLoader worker (and epoch) draws the same masks", T_COLLATOR),
    m("collator-pad-multiple", "data/collator.py",
      "width = -(-width // m) * m",
      "width = (width // m + 1) * m",
      "pad_to_multiple_of adds a block even when the width is already a multiple",
      (*T_COLLATOR, f"{GAPS}::test_pad_to_multiple_of_pads_to_the_smallest_multiple")),
    # --- data/corpus.py ---------------------------------------------------------------------
    m("corpus-initials", "data/corpus.py",
      'if last_word.lstrip("(\\"\'") in _ABBREVIATIONS or re.fullmatch(r"[a-z]", last_word):',
      'if last_word.lstrip("(\\"\'") in _ABBREVIATIONS:',
      "an initial (J. Smith) ends a sentence", T_CORPUS),
    m("corpus-split-rank-seed", "data/corpus.py",
      'return hashlib.sha256(f"{seed}\\x00{doc.title}\\x00{first}".encode()).hexdigest()',
      'return hashlib.sha256(f"{doc.title}\\x00{first}".encode()).hexdigest()',
      "the train/validation split ignores the seed",
      (T_CORPUS[0], f"{GAPS}::test_the_validation_split_depends_on_the_seed", "-k",
       T_CORPUS[-1] + " or validation_split")),
    # --- modules ----------------------------------------------------------------------------
    m("attn-no-sqrt", "models/bert.py",
      "return q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)",
      "return q @ k.transpose(-2, -1) / self.head_dim",
      "scores divided by d instead of sqrt(d) (explicit path)", T_MODULES),
    m("attn-softmax-dim", "models/bert.py",
      "probs = scores.softmax(dim=-1)  # (B, nh, T, S)",
      "probs = scores.softmax(dim=-2)  # (B, nh, T, S)",
      "softmax over queries instead of keys (explicit path)", T_MODULES),
    m("attn-mask-inverted", "models/bert.py",
      "~mask, torch.finfo(q.dtype).min",
      "mask, torch.finfo(q.dtype).min",
      "additive mask blocks the real tokens and keeps the padding", T_MODULES),
    m("attn-dropout-in-eval", "models/bert.py",
      "drop = self.dropout_p if self.training else 0.0",
      "drop = self.dropout_p",
      "attention dropout also at evaluation (fused path)", T_MODULES),
    m("attn-merge-heads", "models/bert.py",
      "context = context.transpose(1, 2).reshape(B, T, nh * hs)",
      "context = context.reshape(B, T, nh * hs)",
      "heads merged without moving them back next to each other", T_MODULES),
    m("ffn-gelu-new-constant", "activations.py",
      "0.044715 * x.pow(3)",
      "0.04715 * x.pow(3)",
      "gelu_new's cubic coefficient mistyped", (*T_ALBERT, "-k", "outputs_equal")),
    m("encoder-no-residual", "models/bert.py",
      "x = self.attention_norm(x + self.dropout(attn))",
      "x = self.attention_norm(self.dropout(attn))",
      "post-LN attention sublayer without its residual", T_MODULES),
    m("encoder-pre-ln-ffn-unnormed", "models/bert.py",
      "return x + self.dropout(self.feed_forward(self.output_norm(x))), probs",
      "return x + self.dropout(self.feed_forward(x)), probs",
      "pre-LN feed-forward reads the un-normalised stream",
      (*T_MODULES, f"{GAPS}::test_pre_ln_layer_and_stack_follow_the_formula")),
    m("encoder-no-final-norm", "models/bert.py",
      "        if self.final_norm is not None:\n            x = self.final_norm(x)",
      "        pass",
      "pre-LN stack without its final LayerNorm",
      (*T_MODULES, f"{GAPS}::test_pre_ln_layer_and_stack_follow_the_formula")),
    m("embeddings-no-token-types", "models/bert.py",
      "x = x + self.token_type_embeddings(token_type_ids)",
      "x = x",
      "segment embeddings never added", T_MODULES),
    m("embeddings-default-eps", "models/bert.py",
      "self.LayerNorm = nn.LayerNorm(dim, eps=config.layer_norm_eps)\n        self.dropout",
      "self.LayerNorm = nn.LayerNorm(dim)\n        self.dropout",
      "embedding LayerNorm ignores layer_norm_eps (torch default 1e-5)", (*T_BERT, *T_EPS)),
    m("heads-pooler-no-tanh", "models/bert.py",
      "return self.dense(hidden[:, 0]).tanh()",
      "return self.dense(hidden[:, 0])",
      "pooler without tanh", T_BERT),
    m("heads-mlm-order", "models/bert.py",
      "return self.decoder(self.LayerNorm(self.act(self.dense(hidden))))",
      "return self.decoder(self.act(self.LayerNorm(self.dense(hidden))))",
      "MLM transform applies LayerNorm before the activation", T_BERT),
    m("heads-qa-swapped", "models/bert.py",
      "start, end = self.qa_outputs(hidden).unbind(dim=-1)",
      "end, start = self.qa_outputs(hidden).unbind(dim=-1)",
      "QA start and end logits swapped", T_BERT),
    m("sharing-attention-is-ffn", "modules/sharing.py",
      'owner if sharing in ("all", "attention") else i,',
      'owner if sharing in ("all", "ffn") else i,',
      "sharing='attention' shares the feed-forward and vice versa", T_ALBERT),
    m("sharing-groups-interleaved", "modules/sharing.py",
      "owner = first_user.setdefault((layer // per_group, inner), i)",
      "owner = first_user.setdefault((layer % num_hidden_groups, inner), i)",
      "groups interleave layers instead of taking consecutive runs", T_ALBERT),
    m("sharing-own-attention-norm", "modules/sharing.py",
      "layer.attention_norm = layers[i_attention].attention_norm",
      "pass",
      "shared attention keeps a LayerNorm of its own", T_ALBERT),
    m("relpos-j-minus-i", "modules/relative_position.py",
      "rel = q_ids[:, None] - k_ids[None, :]",
      "rel = k_ids[None, :] - q_ids[:, None]",
      "relative position j - i instead of i - j", T_RELPOS),
    m("relpos-bucket-boundary", "modules/relative_position.py",
      "return torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)",
      "return torch.where(abs_pos < mid, relative_pos.type_as(log_pos), log_pos * sign)",
      "log buckets start at |d| = mid instead of after it", T_RELPOS,
      equivalent="at |d| = mid the log formula gives ceil(log(1) ...) + mid = mid = |d|: the "
      "same bucket either way"),
    m("relpos-c2p-shift", "modules/relative_position.py",
      "return torch.clamp(relative_pos + span, 0, 2 * span - 1)",
      "return torch.clamp(relative_pos + span - 1, 0, 2 * span - 1)",
      "c2p reads the row of the neighbouring distance", T_RELPOS),
    m("relpos-scale-no-terms", "modules/relative_position.py",
      "return math.sqrt(head_dim * (1 + n_terms))",
      "return math.sqrt(head_dim)",
      "DeBERTa scale ignores the number of position terms", T_RELPOS),
    m("relpos-delta-sign", "modules/relative_position.py",
      "d = i - j + k",
      "d = j - i + k",
      "the paper's delta(i, j) computed as delta(j, i)", T_RELPOS),
    m("disentangled-p2c-no-transpose", "models/deberta.py",
      "index = p2c_index(relative_pos, span, paper=self.paper_p2c).T",
      "index = p2c_index(relative_pos, span, paper=self.paper_p2c)",
      "p2c gathers with the untransposed index", T_DEBERTA),
    m("disentangled-c2p-query-proj", "models/deberta.py",
      "key_r = self.split_heads((self.key if self.share_att_key else self.pos_key)(rel))",
      "key_r = self.split_heads((self.query if self.share_att_key else self.pos_key)(rel))",
      "c2p projects the relative table with the query weights", T_DEBERTA),
    m("disentangled-no-pos-dropout", "models/deberta.py",
      "rel = self.pos_dropout(rel_embeddings)[None]",
      "rel = rel_embeddings[None]",
      "no dropout on the relative embeddings in training",
      (*T_DEBERTA, f"{GAPS}::test_deberta_position_dropout_acts_in_training_only")),
    # --- models -----------------------------------------------------------------------------
    m("bert-mask-queries", "models/bert.py",
      "keep_mask = attention_mask[:, None, None, :].bool()",
      "keep_mask = attention_mask[:, None, :, None].bool()",
      "padding mask applied to queries instead of keys", T_BERT),
    m("bert-nsp-loss-dropped", "models/bert.py",
      "loss=total_loss(mlm_loss, nsp_loss),",
      "loss=mlm_loss,",
      "pretraining loss leaves out the NSP/SOP loss", T_BERT),
    m("bert-qa-ignore", "models/bert.py",
      "start = start_positions.clamp(0, seq_len)",
      "start = start_positions.clamp(0, seq_len - 1)",
      "a truncated-away answer start counts as the last token", T_BERT),
    m("bert-regression-ce", "models/bert.py",
      "if labels is not None and self.config.num_labels == 1:",
      "if labels is not None and self.config.num_labels == 0:",
      "num_labels=1 (regression) uses cross-entropy",
      (*T_BERT, f"{GAPS}::test_one_label_means_regression_with_mean_squared_error")),
    m("base-init-std", "models/base.py",
      "nn.init.normal_(module.weight, 0.0, std)\n            if module.bias",
      "nn.init.normal_(module.weight, 0.0, 0.02)\n            if module.bias",
      "Linear layers ignore initializer_range",
      (f"{GAPS}::test_initializer_range_sets_the_spread_of_every_weight",
       "tests/test_bert_modules.py")),
    m("base-padding-row", "models/base.py",
      "module.weight.data[module.padding_idx].zero_()",
      "pass",
      "the padding embedding row is not zeroed at init", T_ROBERTA),
    m("roberta-positions", "models/roberta.py",
      "return real.cumsum(dim=1) * real + padding_idx",
      "return real.cumsum(dim=1) + padding_idx",
      "padding positions get real position ids", T_ROBERTA),
    m("albert-no-projection", "models/albert.py",
      "return self.projection(super().forward(input_ids, token_type_ids))",
      "return super().forward(input_ids, token_type_ids)",
      "ALBERT embeddings never projected E -> H", T_ALBERT),
    m("deberta-padding-not-zeroed", "models/deberta.py",
      "x = x * keep_mask[:, 0, 0, :, None].to(x.dtype)",
      "x = x",
      "padded positions enter the DeBERTa encoder non-zero", T_DEBERTA),
    m("deberta-pair-mask", "models/deberta.py",
      "return keep_mask & keep_mask.transpose(-1, -2)",
      "return keep_mask",
      "padded queries are not masked (only keys)", T_DEBERTA),
    m("deberta-no-rel-norm", "models/deberta.py",
      "            table = self.rel_norm(table)",
      "            table = table",
      "relative table used without its LayerNorm", T_DEBERTA),
    m("deberta-emd-positions", "models/deberta.py",
      "query = hidden + embeddings.position_embeddings(embeddings.position_ids(input_ids))",
      "query = hidden",
      "EMD forgets the absolute positions", T_DEBERTA),
    # --- counting.py ------------------------------------------------------------------------
    m("count-pre-ln-norm", "counting.py",
      "(1 + 2 * n_layers + (1 if config.pre_layer_norm else 0))",
      "(1 + 2 * n_layers)",
      "pre-LN's final LayerNorm not counted", T_COUNT),
    m("count-decoder-bias", "counting.py",
      "mlm = linear(h, e) + layer_norm(e) + v",
      "mlm = linear(h, e) + layer_norm(e)",
      "MLM decoder bias not counted", T_COUNT),
    m("count-nsp-bias", "counting.py",
      '"ForPreTraining": mlm + linear(h, 2),',
      '"ForPreTraining": mlm + linear(h, 2, bias=False),',
      "NSP head bias not counted", T_COUNT),
    m("count-token-types", "counting.py",
      "config.max_position_embeddings + config.type_vocab_size) * dim",
      "config.max_position_embeddings) * dim",
      "segment embeddings not counted", T_COUNT),
    m("count-pooled-classifier", "counting.py",
      'POOLED_TASKS = {"Model", "ForPreTraining", "ForSequenceClassification"}',
      'POOLED_TASKS = {"Model", "ForPreTraining"}',
      "sequence classifier counted without its pooler", T_COUNT),
    # --- interop ----------------------------------------------------------------------------
    m("interop-bert-eps", "interop/bert.py",
      '    "layer_norm_eps",\n    "pad_token_id",\n)',
      '    "pad_token_id",\n)',
      "BERT, RoBERTa, ALBERT and DeBERTa conversions (BERT's shared fields) drop layer_norm_eps "
      "(issue 23)",
      ("tests/test_bert_parity.py", *T_ROBERTA, *T_ALBERT, *T_DEBERTA, *T_EPS)),
    m("interop-training-mode", "interop/core.py",
      "model.eval() if not hf_model.training else model.train()",
      "model.eval()",
      "a converted model is always in eval mode", ("tests/test_bert_parity.py",)),
    m("interop-albert-group-index", "interop/albert.py",
      'hf_layer = f"{theirs}encoder.albert_layer_groups.{layer // per_group}.albert_layers.{inner}"',
      'hf_layer = f"{theirs}encoder.albert_layer_groups.{layer % _hf_groups(config)}'
      '.albert_layers.{inner}"',
      "ALBERT layer groups mapped round-robin", T_ALBERT),
    m("interop-distil-dropouts-swapped", "interop/distilbert.py",
      '    ("hidden_dropout_prob", "dropout"),\n    ("attention_probs_dropout_prob", "attention_dropout"),',
      '    ("hidden_dropout_prob", "attention_dropout"),\n    ("attention_probs_dropout_prob", "dropout"),',
      "DistilBERT conversion swaps the two dropout rates",
      (*T_DISTILBERT, f"{GAPS}::test_conversion_keeps_every_config_field")),
    m("interop-roberta-classifier-dropout", "interop/roberta.py",
      "classifier_dropout=getattr(hf_config, \"classifier_dropout\", None),",
      "classifier_dropout=None,",
      "RoBERTa conversion drops classifier_dropout",
      (*T_ROBERTA, f"{GAPS}::test_conversion_keeps_every_config_field")),
    # --- training ---------------------------------------------------------------------------
    m("train-no-clip", "training/engine.py",
      "grad_norm = float(nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))",
      "grad_norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])))",
      "gradient norm computed and logged but never clipped (issue 23)", T_ENGINE),
    m("train-resume-clock", "training/engine.py",
      'self.step, self.elapsed_s = int(state["step"]), float(state["elapsed_s"])',
      'self.step, self.elapsed_s = int(state["step"]), 0.0',
      "resume resets elapsed_s to 0 (issue 23)", T_RESUME),
    m("train-accumulation-scale", "training/engine.py",
      "scale = float(self.dist.world_size) if shares is not None else 1.0 / accumulation",
      "scale = float(self.dist.world_size) if shares is not None else 1.0",
      "a plain objective's accumulated gradients are summed, not averaged",
      (*ENGINE, f"{GAPS}::test_accumulation_averages_the_micro_batches")),
    m("train-shares-equal", "training/engine.py",
      "{kind: c.get(kind, 0.0) / total[kind] if total[kind] > 0 else 0.0 for kind in kinds}",
      "{kind: 1.0 / len(counts) for kind in kinds}",
      "big batches average micro-batch means again (inexact when target counts differ)",
      (*ENGINE, f"{GAPS}::test_accumulation_averages_the_micro_batches")),
    m("train-count-masked", "objectives/targets.py",
      'counts["mlm"] = float((labels != IGNORE_INDEX).sum())',
      'counts["mlm"] = float(labels.numel())',
      "MLM shares weighted by all positions instead of the masked ones",
      (*ENGINE, f"{GAPS}::test_accumulation_averages_the_micro_batches")),
    m("train-sampler-slots", "training/engine.py",
      'start = pos["offset"] + slot * self.micro_batch_size',
      'start = pos["offset"]',
      "every micro-batch of a step reads the same examples", T_ENGINE),
    m("train-progress-mid-step", "training/engine.py",
      "parts.append((self.step + 0.5) / self.config.max_steps)",
      "parts.append(self.step / self.config.max_steps)",
      "schedule evaluated at the step start (first step gets lr 0)", T_ENGINE),
    m("train-eval-every-minutes", "training/engine.py",
      "self.elapsed_s - last_time >= 60.0 * every_minutes",
      "self.elapsed_s >= 60.0 * every_minutes",
      "minute-based evaluation fires every step once the first interval has passed",
      (*ENGINE, f"{GAPS}::test_evaluation_every_minutes_follows_the_clock")),
    m("train-time-budget-units", "training/engine.py",
      "if self.config.max_minutes is not None and self.elapsed_s >= 60.0 * self.config.max_minutes:",
      "if self.config.max_minutes is not None and self.elapsed_s >= self.config.max_minutes:",
      "max_minutes read as seconds", T_ENGINE),
    m("train-dropout-seed", "training/engine.py",
      "torch.manual_seed(derived_seed(cfg.seed, self.step, slot, _PURPOSE_DROPOUT))",
      "pass",
      "dropout not re-seeded per micro-batch (resume no longer bitwise)",
      (*ENGINE, f"{GAPS}::test_dropout_depends_only_on_the_seed_and_the_step")),
    m("checkpoint-no-rng", "training/checkpoint.py",
      "    restore_rng: bool = True,",
      "    restore_rng: bool = False,",
      "load_checkpoint does not restore the global RNG (issue 23)", T_CKPT),
    m("checkpoint-betas-list", "training/checkpoint.py",
      'group["betas"] = tuple(group["betas"])',
      'group["betas"] = list(group["betas"])',
      "AdamW betas come back as a list", T_CKPT),
    m("checkpoint-config-check", "training/checkpoint.py",
      "if saved_config is not None and config is not None and saved_config != config:",
      "if False:",
      "a checkpoint of another config is loaded without naming the difference", T_CKPT),
    m("optim-decay-on-norms", "training/optim.py",
      'if isinstance(module, _NORM_TYPES) or name == "bias" or name.endswith("_bias"):',
      'if name == "bias" or name.endswith("_bias"):',
      "weight decay applied to LayerNorm gains", T_ENGINE),
    m("optim-linear-decay", "training/optim.py",
      "return max(0.0, (1.0 - progress) / max(1.0 - warmup, 1e-12))",
      "return max(0.0, 1.0 - progress)",
      "linear decay does not start from the peak after warmup", T_ENGINE),
    m("optim-one-cycle-sign", "training/optim.py",
      "return end + (1.0 - end) * (1 + math.cos(math.pi * t)) / 2",
      "return end + (1.0 - end) * (1 - math.cos(math.pi * t)) / 2",
      "one-cycle decay rises instead of falling", T_ENGINE),
]
# fmt: on


# --- running ---------------------------------------------------------------------------------


def snapshot(worktree: bool) -> Path:
    """A private copy of what the tests need: the committed tree, or the working tree."""
    root = Path(tempfile.mkdtemp(prefix="course-mutation-"))
    if worktree:
        for name in COPIED:
            src = REPO / name
            if src.is_dir():
                shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, root / name)
    else:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "HEAD", *COPIED],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root


def environment(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant and its original may share size and mtime
    env["COURSE_FAST"] = "1"
    return env


def check_isolation(root: Path) -> str:
    """The copy, not the editable install, is what `import course_lib` finds."""
    out = subprocess.run(
        [sys.executable, "-c", "import course_lib; print(course_lib.__file__)"],
        cwd=root,
        env=environment(root),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(out).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"course_lib imported from {out}, not from the copy {root}; stopping.")
    return out


def status_of(mutant: Mutant, root: Path) -> str:
    text = (root / "src" / "course_lib" / mutant.path).read_text()
    n = text.count(mutant.original)
    return "ok" if n == 1 else f"stale ({n} matches)"


class CpuLock:
    """The shared CPU lock (flock, as one-at-a-time takes it), held for one pytest run, or for
    consecutive runs until `hold_s` seconds have passed; then released so queued jobs go first."""

    def __init__(self, path: str = LOCK, hold_s: float = 0.0) -> None:
        self.path, self.hold_s = path, hold_s
        self.file = None
        self.since = 0.0

    def acquire(self) -> float:
        """Take the lock if not held; return the seconds spent waiting."""
        if self.file is not None:
            return 0.0
        start = time.monotonic()
        self.file = open(self.path, "a")  # noqa: SIM115  (held across calls)
        fcntl.flock(self.file, fcntl.LOCK_EX)
        self.since = time.monotonic()
        return self.since - start

    def release(self, force: bool = False) -> None:
        if self.file is not None and (force or time.monotonic() - self.since >= self.hold_s):
            fcntl.flock(self.file, fcntl.LOCK_UN)
            self.file.close()
            self.file = None


def run_pytest(root: Path, args: tuple[str, ...], timeout: float, lock: CpuLock) -> dict:
    """pytest -x -q on `args` in the copy, holding the shared CPU lock while it runs."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:randomly",
        "--durations=0",
        "--durations-min=1000",
        *args,
    ]
    waited = lock.acquire()
    start = time.monotonic()
    try:
        proc = subprocess.run(
            command,
            cwd=root,
            env=environment(root),
            capture_output=True,
            text=True,
            timeout=timeout,
            # A tool started in the background (nohup, &) inherits an ignored SIGINT; the tests
            # of Ctrl-C handling need Python's own handler back.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        rc, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as err:
        rc, output = -1, f"timeout after {timeout:.0f} s\n{err.stdout or ''}"
    finally:
        lock.release()
    return {"rc": rc, "output": output, "seconds": time.monotonic() - start, "waited": waited}


def first_failure(output: str) -> str:
    for pattern in (r"^(FAILED|ERROR) (\S+)", r"^E +(.{0,160})"):
        match = re.search(pattern, output, re.M)
        if match:
            return match.group(2) if match.lastindex == 2 else match.group(1)
    return output.strip().splitlines()[-1][:160] if output.strip() else ""


def select(tests: tuple[str, ...], within: str | None, without: str | None) -> tuple[str, ...]:
    """Keep only the test paths under `within` / drop those under `without`. A "-k" filter
    stays with --without; with --within it is dropped (the kept node ids are explicit)."""
    paths, keyword, args = [], [], list(tests)
    while args:
        arg = args.pop(0)
        if arg == "-k":
            keyword = ["-k", args.pop(0)]
        elif (within is None or arg.startswith(within)) and not (
            without and arg.startswith(without)
        ):
            paths.append(arg)
    if not paths:
        return ()
    return (*paths, *([] if within else keyword))


def run_mutant(
    mutant: Mutant, root: Path, timeout: float, tests: tuple[str, ...] | None, lock: CpuLock
) -> dict:
    path = root / "src" / "course_lib" / mutant.path
    original = path.read_text()
    result = {**asdict(mutant), "module": mutant.module}
    if tests:
        result["tests"] = list(tests)
    status = status_of(mutant, root)
    if status != "ok":
        return {**result, "outcome": "stale", "detail": status, "seconds": 0.0}
    path.write_text(original.replace(mutant.original, mutant.replacement))
    try:
        run = run_pytest(root, tuple(result["tests"]), timeout, lock)
    finally:
        path.write_text(original)
    if run["rc"] == 0:
        outcome, detail = "survived", "all selected tests passed"
    elif run["rc"] in (4, 5):
        outcome, detail = (
            "error",
            f"pytest usage error or no tests (rc {run['rc']}): "
            + (run["output"].strip().splitlines() or [""])[-1][:160],
        )
    elif run["rc"] == -1:
        outcome, detail = "killed", "timeout"
    else:
        outcome, detail = "killed", first_failure(run["output"])
    return {
        **result,
        "outcome": outcome,
        "detail": detail,
        "seconds": round(run["seconds"], 1),
        "waited_s": round(run["waited"], 1),
    }


def summary(results: list[dict]) -> dict:
    by_module: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        key = "equivalent" if r["equivalent"] else r["outcome"]
        by_module[r["module"]][key] += 1
    table = {}
    for module, c in sorted(by_module.items()):
        scored = c["killed"] + c["survived"]
        table[module] = {**c, "score": round(c["killed"] / scored, 3) if scored else None}
    total = sum((c for c in by_module.values()), Counter())
    scored = total["killed"] + total["survived"]
    return {
        "modules": table,
        "total": {**total, "score": total["killed"] / scored if scored else None},
    }


def markdown(results: list[dict], totals: dict) -> str:
    lines = [
        "| area | mutants | killed | survived | equivalent | stale/error | killed % |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for module, c in {**totals["modules"], "**all**": totals["total"]}.items():
        n = sum(v for k, v in c.items() if k != "score")
        score = "-" if c["score"] is None else f"{100 * c['score']:.0f}%"
        lines.append(
            f"| {module} | {n} | {c.get('killed', 0)} | {c.get('survived', 0)} | "
            f"{c.get('equivalent', 0)} | {c.get('stale', 0) + c.get('error', 0)} | {score} |"
        )
    lines += ["", "| mutant | file | bug | outcome | caught by / why |", "|---|---|---|---|---|"]
    for r in results:
        outcome = "equivalent" if r["equivalent"] else r["outcome"]
        why = r["equivalent"] or r["detail"]
        lines.append(
            f"| {r['id']} | {r['path']} | {r['description'].replace('|', '/')} | {outcome} | "
            f"{why.replace('|', '/')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="list mutants and check snippets")
    parser.add_argument("--only", help="comma-separated mutant ids")
    parser.add_argument("--module", help="only mutants in this area (data, models, ...)")
    parser.add_argument("--tests", nargs="+", help="run these pytest arguments for every mutant")
    parser.add_argument("--within", help="keep only the selected tests under this path")
    parser.add_argument("--without", help="drop the selected tests under this path")
    parser.add_argument(
        "--worktree",
        action="store_true",
        help="copy the working tree instead of the committed HEAD",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip checking that every test selection passes unmutated",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per pytest run")
    parser.add_argument(
        "--hold",
        type=float,
        default=0.0,
        help="keep the CPU lock across consecutive mutants for up to this many seconds "
        "(default 0: taken and released for every pytest run)",
    )
    parser.add_argument("--out", default=str(REPO / "docs" / "mutation-results.json"))
    parser.add_argument("--markdown", help="also write the result tables to this file")
    parser.add_argument(
        "--merge", help="a previous results JSON: its mutants that this run skips are kept"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = parser.parse_args(argv)

    mutants = MUTANTS
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {mu.id for mu in MUTANTS}
        if unknown:
            parser.error(f"unknown mutant id(s) {sorted(unknown)}; see --list.")
        mutants = [mu for mu in mutants if mu.id in wanted]
    if args.module:
        mutants = [mu for mu in mutants if mu.module == args.module]
    if not mutants:
        parser.error("no mutant selected.")
    tests = tuple(args.tests) if args.tests else None
    if args.within or args.without:
        mutants = [replace(mu, tests=select(mu.tests, args.within, args.without)) for mu in mutants]
        mutants = [mu for mu in mutants if mu.tests]

    root = snapshot(args.worktree)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still remove the copy
    lock = CpuLock(hold_s=args.hold)
    try:
        if args.list:
            for mu in mutants:
                print(f"{mu.id:36} {mu.path:36} {status_of(mu, root):16} {mu.description}")
            return 0
        print(f"copy: {root} (course_lib from {check_isolation(root)})", flush=True)
        started = time.monotonic()
        baseline = {}
        if not args.no_baseline:
            for selection in sorted({tests or mu.tests for mu in mutants}):
                run = run_pytest(root, selection, args.timeout, lock)
                baseline[" ".join(selection)] = round(run["seconds"], 1)
                print(
                    f"baseline {run['seconds']:6.1f}s rc={run['rc']} {' '.join(selection)}",
                    flush=True,
                )
                if run["rc"] != 0:
                    print(run["output"][-3000:])
                    raise SystemExit("a test selection fails without any mutant; fix that first.")
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        merged = {}  # earlier results (--merge) for mutants this run does not repeat
        if args.merge:
            merged = {r["id"]: r for r in json.loads(Path(args.merge).read_text())["mutants"]}
        order = [mu.id for mu in MUTANTS]
        results: list[dict] = []

        def write() -> tuple[list[dict], dict]:
            """Write the record so far (a run stopped half-way keeps what it measured)."""
            done = {r["id"]: r for r in results}
            rows = [done.get(i) or merged[i] for i in order if i in done or i in merged]
            totals = summary(rows)
            record = {
                "commit": commit + (" + working tree" if args.worktree else ""),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "wall_seconds": round(time.monotonic() - started),
                "baseline_seconds": baseline,
                "merged_from": args.merge,
                "summary": totals,
                "mutants": rows,
            }
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
            return rows, totals

        for i, mu in enumerate(mutants, 1):
            r = run_mutant(mu, root, args.timeout, tests, lock)
            results.append(r)
            write()
            tag = "EQUIVALENT " + r["outcome"] if mu.equivalent else r["outcome"].upper()
            print(
                f"[{i}/{len(mutants)}] {tag:9} {r['seconds']:6.1f}s {mu.id}: {r['detail']}",
                flush=True,
            )
        rows, totals = write()
        table = markdown(rows, totals)
        if args.markdown:
            Path(args.markdown).write_text(table + "\n")
        print("\n" + table)
        t = totals["total"]
        print(
            f"\nkilled {t.get('killed', 0)} of {t.get('killed', 0) + t.get('survived', 0)} "
            f"scored mutants; results in {args.out}"
        )
        return 0
    finally:
        lock.release(force=True)
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
