"""Fill-mask: what a masked-language model predicts for a [MASK], as a learner wants to see it.

`fill_mask` mirrors transformers' fill-mask pipeline (a list of {"score", "token", "token_str",
"sequence"} per mask). `fill_mask_report` hides one word of each held-out sentence and checks
whether the model's top-k contains it: a direct, human-readable measure of what was learned.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn


def _special_ids(tokenizer: Any) -> list[int]:
    ids = getattr(tokenizer, "special_ids", None)
    if ids is None:
        ids = [tokenizer.pad_token_id, tokenizer.mask_token_id]
    return sorted(set(int(i) for i in ids))


@torch.no_grad()
def fill_mask(
    model: nn.Module, tokenizer: Any, text: str, top_k: int = 5
) -> list[dict[str, Any]] | list[list[dict[str, Any]]]:
    """The top_k predictions for each mask token in `text`, best first.

    One mask: a list of {"score", "token", "token_str", "sequence"}; several masks: one such list
    per mask, left to right. Special tokens ([CLS], [PAD], ...) are never proposed.
    """
    mask_token = tokenizer.mask_token
    if mask_token not in text:
        raise ValueError(
            f"the text has no mask token {mask_token!r}: write it where the model should fill "
            f"in a word, e.g. 'The capital of France is {mask_token}.'"
        )
    if top_k < 1:
        raise ValueError(f"top_k={top_k!r} is invalid: expected a positive integer.")
    max_length = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    encoded = tokenizer.encode(text, max_length=max_length)
    input_ids = torch.tensor([encoded["input_ids"]])
    positions = (input_ids[0] == tokenizer.mask_token_id).nonzero().flatten()
    if positions.numel() == 0:
        raise ValueError(f"the mask token {mask_token!r} was truncated away; shorten the text.")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = model(
        input_ids=input_ids.to(device),
        attention_mask=torch.tensor([encoded["attention_mask"]], device=device),
        token_type_ids=torch.tensor([encoded["token_type_ids"]], device=device),
    )
    model.train(was_training)
    logits = out.mlm_logits[0, positions.to(device)].float().cpu()
    logits[:, _special_ids(tokenizer)] = float("-inf")
    probs = logits.softmax(dim=-1)
    scores, ids = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    results = []
    for i, position in enumerate(positions.tolist()):
        candidates = []
        for score, token in zip(scores[i].tolist(), ids[i].tolist()):
            filled = input_ids[0].clone()
            filled[position] = token
            candidates.append(
                {
                    "score": score,
                    "token": token,
                    "token_str": tokenizer.decode([token]).strip(),
                    "sequence": tokenizer.decode(filled.tolist()),
                }
            )
        results.append(candidates)
    return results[0] if len(results) == 1 else results


def masked_word_examples(
    tokenizer: Any,
    sentences: Sequence[str],
    n: int = 8,
    seed: int = 0,
    min_words: int = 6,
    max_tokens: int | None = None,
) -> list[tuple[str, str]]:
    """(text with one word replaced by the mask token, the hidden word) for up to n sentences.

    Only alphabetic words that are a single token are hidden (one mask can only predict one
    token), and only in sentences of at least `min_words` words, so there is context to use.
    `max_tokens` skips sentences longer than that (with [CLS] and [SEP]): a model pretrained on
    short sequences has never trained the position embeddings beyond them.
    """
    rng = random.Random(seed)
    order = list(range(len(sentences)))
    rng.shuffle(order)
    examples = []
    for index in order:
        words = sentences[index].split()
        if len(words) < min_words:
            continue
        if max_tokens is not None and len(tokenizer.tokenize(sentences[index])) + 2 > max_tokens:
            continue
        candidates = [
            i
            for i, w in enumerate(words)
            if w.isalpha() and len(w) > 1 and len(tokenizer.tokenize(w)) == 1
        ]
        if not candidates:
            continue
        i = rng.choice(candidates)
        answer = words[i]
        words[i] = tokenizer.mask_token
        examples.append((" ".join(words), answer))
        if len(examples) == n:
            break
    return examples


def fill_mask_report(
    model: nn.Module,
    tokenizer: Any,
    sentences: Sequence[str],
    n: int = 8,
    top_k: int = 5,
    seed: int = 0,
    max_tokens: int | None = None,
) -> list[dict[str, Any]]:
    """Hide one word in each of n held-out sentences; record the model's top_k and whether the
    hidden word is among them ("hit"). Compare before and after training. `max_tokens`: use
    only sentences that fit the length the model was pretrained on."""
    rows = []
    for text, answer in masked_word_examples(tokenizer, sentences, n, seed, max_tokens=max_tokens):
        predictions = fill_mask(model, tokenizer, text, top_k)
        words = [p["token_str"] for p in predictions]
        rows.append(
            {
                "text": text,
                "answer": answer,
                "predictions": words,
                "hit": answer.lower() in [w.lower() for w in words],
            }
        )
    return rows


def format_fill_mask_report(
    rows: list[dict[str, Any]], title: str = "fill-mask", show: int | None = None
) -> str:
    """A plain-text table of `fill_mask_report` rows, with the hit count in the heading.

    `show` lists only the first rows (the count in the heading still covers all of them), so a
    20-sentence score stays readable before training, when every row is a miss."""
    hits = sum(row["hit"] for row in rows)
    lines = [
        f"{title}: the hidden word is in the top {len(rows[0]['predictions']) if rows else 0} "
        f"for {hits} of {len(rows)} held-out sentences"
    ]
    shown = rows if show is None else rows[:show]
    for row in shown:
        mark = "+" if row["hit"] else " "
        text = row["text"] if len(row["text"]) <= 90 else row["text"][:87] + "..."
        lines.append(f" {mark} {text}")
        lines.append(f"     answer: {row['answer']:<14} predicted: {', '.join(row['predictions'])}")
    if len(shown) < len(rows):
        lines.append(f"   ... {len(rows) - len(shown)} more sentences in the count above")
    return "\n".join(lines)


def mlm_model(model: nn.Module) -> nn.Module:
    """The model that fills masks: ELECTRA's generator inside its pretrainer, else `model`."""
    return getattr(model, "generator", model)


def discriminator_of(model: nn.Module) -> nn.Module:
    """ELECTRA's discriminator (inside a pretrainer, or alone); ValueError for any other model."""
    discriminator = getattr(model, "discriminator", model)
    if not hasattr(discriminator, "discriminator_head"):
        raise ValueError(
            f"a {type(model).__name__} has no replaced-token discriminator; detection needs an "
            "ELECTRA checkpoint (course pretrain --family electra)"
        )
    return discriminator


@torch.no_grad()
def detect_replaced(model: nn.Module, tokenizer: Any, text: str) -> list[dict[str, Any]]:
    """What ELECTRA's discriminator believes of each token of `text`: one row per token (special
    tokens left out) with "token" and "probability" that it was replaced, not the original.

    Write a sentence with a wrong word in it ("The cat drinks the house.") and see whether the
    discriminator picks it out: that is the whole of its pretraining task.
    """
    discriminator = discriminator_of(model)
    max_length = getattr(discriminator.config, "max_position_embeddings", None)
    encoded = tokenizer.encode(text, max_length=max_length)
    device = next(discriminator.parameters()).device
    was_training = discriminator.training
    discriminator.eval()
    out = discriminator(
        input_ids=torch.tensor([encoded["input_ids"]], device=device),
        attention_mask=torch.tensor([encoded["attention_mask"]], device=device),
        token_type_ids=torch.tensor([encoded["token_type_ids"]], device=device),
    )
    discriminator.train(was_training)
    probabilities = torch.sigmoid(out.logits[0].float()).cpu().tolist()
    special = set(_special_ids(tokenizer))
    return [
        {"token": tokenizer.convert_ids_to_tokens(token), "probability": p}
        for token, p in zip(encoded["input_ids"], probabilities)
        if token not in special
    ]


def format_detection(rows: list[dict[str, Any]]) -> str:
    """`detect_replaced` rows as a table, the tokens believed replaced (p > 0.5) marked."""
    flagged = [row["token"] for row in rows if row["probability"] > 0.5]
    lines = [
        f"the discriminator believes {len(flagged)} of {len(rows)} tokens were replaced"
        + (f": {', '.join(flagged)}" if flagged else "")
    ]
    for row in rows:
        mark = "  <- replaced?" if row["probability"] > 0.5 else ""
        lines.append(f"  {row['probability']:6.1%}  {row['token']}{mark}")
    return "\n".join(lines)
