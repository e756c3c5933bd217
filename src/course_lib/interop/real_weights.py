"""Real checkpoints, when the learner has them: load a released model from a local folder or the
Hugging Face cache, convert it to the course's class with `from_transformers`, and look at it
next to the mini model (fill-mask, replaced-token detection, attention heads).

Nothing here downloads unless asked (`download=True`): offline, `load_real_model` prints one line
that says how to get the weights and returns None, so a notebook cell skips cleanly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from course_lib.interop.core import from_transformers
from course_lib.interop.export import main_logits

# family -> (hub name of the released checkpoint, transformers class to load it with, what the
# checkpoint can show). DeBERTaV3 and ELECTRA were pretrained with replaced-token detection: their
# released discriminators have no MLM head, so they show attention (and RTD for ELECTRA) instead.
CHECKPOINTS: dict[str, tuple[str, str, str]] = {
    "bert": ("bert-base-uncased", "BertForMaskedLM", "fill-mask"),
    "roberta": ("roberta-base", "RobertaForMaskedLM", "fill-mask"),
    "albert": ("albert-base-v2", "AlbertForMaskedLM", "fill-mask"),
    "deberta": ("microsoft/deberta-v3-base", "DebertaV2Model", "attention"),
    "distilbert": ("distilbert-base-uncased", "DistilBertForMaskedLM", "fill-mask"),
    "electra": ("google/electra-small-discriminator", "ElectraForPreTraining", "replaced-token"),
    "modernbert": ("answerdotai/ModernBERT-base", "ModernBertForMaskedLM", "fill-mask"),
}
MASK = "[MASK]"  # write this in a fill-mask text; it becomes the tokenizer's own mask token


@dataclass
class RealModel:
    """A released checkpoint: the transformers model, the course's twin with the same weights, and
    the tokenizer. `max_diff` is the largest |difference| of their outputs on a test sentence."""

    family: str
    source: str
    hf_model: nn.Module
    model: nn.Module
    tokenizer: Any
    max_diff: float

    def encode(self, text: str) -> dict[str, torch.Tensor]:
        """input_ids (1, T), attention_mask (and token_type_ids where the family has them)."""
        text = text.replace(MASK, self.tokenizer.mask_token or MASK)
        encoded = self.tokenizer(text, return_tensors="pt")
        return {k: v for k, v in encoded.items() if k in ("input_ids", "attention_mask")} | (
            {"token_type_ids": encoded["token_type_ids"]}
            if "token_type_ids" in encoded and self.family in ("bert", "albert", "electra")
            else {}
        )

    def tokens(self, text: str) -> list[str]:
        """The tokens of `text` as the model sees them (special tokens included)."""
        return self.tokenizer.convert_ids_to_tokens(self.encode(text)["input_ids"][0].tolist())


def _loader(class_name: str) -> Any:
    import transformers

    return getattr(transformers, class_name)


def load_real_model(
    family: str, source: str | Path | None = None, download: bool = False
) -> RealModel | None:
    """The released checkpoint of `family` (or the folder/hub name `source`), converted to the
    course's class and checked against transformers on one sentence. Returns None, after one
    printed line, when the weights are not on this machine (and `download` is False)."""
    if family not in CHECKPOINTS:
        raise ValueError(f"no real checkpoint for {family!r}; families: {', '.join(CHECKPOINTS)}")
    hub_name, class_name, _ = CHECKPOINTS[family]
    source = str(source or hub_name)
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=not download)
        hf_model = _loader(class_name).from_pretrained(
            source, local_files_only=not download, dtype=torch.float32
        )
    except ImportError as error:  # e.g. DeBERTaV3's tokenizer needs sentencepiece
        print(
            f"skipped: loading {source} needs the {error.name or 'missing'} package; "
            f"pip install {error.name or '<it>'} and run this cell again."
        )
        return None
    except (OSError, ValueError):  # not cached / no such folder / not a model folder
        path = Path(source).expanduser()
        if path.is_dir():
            where = f"{source} holds no {class_name} checkpoint"
        elif path.is_absolute() or source.startswith((".", "~")):
            where = f"no folder at {source}"
        else:
            where = f"{source} is not in this machine's Hugging Face cache"
        print(
            f"skipped: {where}; to see the real model, run load_real_model({family!r}, "
            "download=True) once with internet, or pass source= a folder that holds it."
        )
        return None
    hf_model.eval()
    model = from_transformers(hf_model)
    real = RealModel(family, source, hf_model, model, tokenizer, max_diff=float("nan"))
    inputs = real.encode("The capital of France is Paris.")
    with torch.no_grad():
        ours, theirs = main_logits(model(**inputs)), main_logits(hf_model(**inputs))
    real.max_diff = float((ours - theirs).abs().max())
    return real


def fill_mask(real: RealModel, text: str, top_k: int = 5) -> list[tuple[str, float]]:
    """The top_k tokens (and probabilities) for the one [MASK] in `text`, from the course's model."""
    if CHECKPOINTS[real.family][2] != "fill-mask":
        raise ValueError(
            f"{real.source} was pretrained with replaced-token detection: it has no MLM head to "
            "fill a mask. Look at its attention (and, for ELECTRA, detect_replaced)."
        )
    inputs = real.encode(text)
    where = (inputs["input_ids"][0] == real.tokenizer.mask_token_id).nonzero().flatten()
    if len(where) != 1:
        raise ValueError(f"write exactly one {MASK} in the text; found {len(where)}.")
    with torch.no_grad():
        logits = main_logits(real.model(**inputs))[0, int(where)]  # (V,)
    probs = logits.float().softmax(-1)
    top = probs.topk(top_k)
    words = real.tokenizer.convert_ids_to_tokens(top.indices.tolist())
    return [(w, float(p)) for w, p in zip(words, top.values)]


def detect_replaced(real: RealModel, text: str) -> list[tuple[str, float]]:
    """ELECTRA's discriminator on `text`: each token and the probability that it was replaced."""
    if CHECKPOINTS[real.family][2] != "replaced-token":
        raise ValueError(f"{real.source} has no replaced-token head; use fill_mask.")
    inputs = real.encode(text)
    with torch.no_grad():
        logits = main_logits(real.model(**inputs))[0]  # (T,)
    tokens = real.tokenizer.convert_ids_to_tokens(inputs["input_ids"][0].tolist())
    return [(t, float(p)) for t, p in zip(tokens, logits.float().sigmoid())]


def show_real_model(real: RealModel, texts: list[str], top_k: int = 5) -> Any:
    """Print what the released model says about `texts` (fill-mask top-k, or ELECTRA's replaced
    probabilities) and return the attention grid of the first text: three layers (first, middle,
    last), every head."""
    from course_lib.viz.attention import attention_grid, compute_attentions

    print(
        f"{real.source} -> course_lib {type(real.model).__name__}: "
        f"same outputs as transformers within {real.max_diff:.1e}"
    )
    task = CHECKPOINTS[real.family][2]
    for text in texts:
        if task == "fill-mask":
            shown = ", ".join(f"{w} {p:.2f}" for w, p in fill_mask(real, text, top_k))
            print(f"  {text}\n    -> {shown}")
        elif task == "replaced-token":
            flagged = [f"{t} {p:.2f}" for t, p in detect_replaced(real, text) if p > 0.5]
            print(f"  {text}\n    -> replaced (p > 0.5): {', '.join(flagged) or 'none'}")
    text = texts[0].replace(MASK, real.tokenizer.mask_token or MASK)
    attention = compute_attentions(real.model, real.encode(text), tokens=real.tokens(text))
    n_layers = next(iter(attention.maps.values())).shape[0]
    layers = sorted({0, n_layers // 2, n_layers - 1})
    return attention_grid(attention.maps, attention.tokens, layers=layers)
