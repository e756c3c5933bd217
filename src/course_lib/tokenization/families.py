"""The three subword families and the model families that use them.

Each family fixes a pipeline (normalizer -> pre-tokenizer -> model -> post-processor ->
decoder), a set of special tokens and the layout of a sentence pair:

| family    | used by                 | specials                                   | pair layout              |
|-----------|-------------------------|--------------------------------------------|--------------------------|
| wordpiece | BERT, DistilBERT        | [PAD] [UNK] [CLS] [SEP] [MASK]             | [CLS] A [SEP] B [SEP]    |
| bpe       | RoBERTa (byte-level)    | <s> <pad> </s> <unk> <mask>                | <s> A </s></s> B </s>    |
| unigram   | ALBERT, DeBERTa-v3      | <pad> <unk> [CLS] [SEP] [MASK]             | [CLS] A [SEP] B [SEP]    |
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    normalizers,
    pre_tokenizers,
    processors,
)

FAMILY_ALIASES = {
    "wordpiece": "wordpiece",
    "bert": "wordpiece",
    "distilbert": "wordpiece",
    "electra": "wordpiece",
    "bpe": "bpe",
    "byte-level-bpe": "bpe",
    "roberta": "bpe",
    "modernbert": "bpe",  # byte-level BPE, as ModernBERT's (OLMo's) tokenizer
    "unigram": "unigram",
    "sentencepiece": "unigram",
    "albert": "unigram",
    "deberta": "unigram",
    "deberta-v3": "unigram",
}


def canonical_family(family: str) -> str:
    """'bert' -> 'wordpiece', 'roberta' -> 'bpe', 'albert'/'deberta' -> 'unigram'."""
    key = family.lower().strip()
    if key not in FAMILY_ALIASES:
        raise ValueError(
            f"Unknown tokenizer family {family!r}; use one of 'wordpiece', 'bpe', 'unigram' "
            f"or a model name: {sorted(k for k in FAMILY_ALIASES if FAMILY_ALIASES[k] != k)}."
        )
    return FAMILY_ALIASES[key]


@dataclass(frozen=True)
class SpecialTokens:
    """The five roles every family needs, as token strings, in vocabulary order."""

    pad: str
    unk: str
    cls: str
    sep: str
    mask: str
    order: tuple[str, ...]  # the order in which they take ids 0, 1, 2, ... when training

    @property
    def as_dict(self) -> dict[str, str]:
        return {
            "pad": self.pad,
            "unk": self.unk,
            "cls": self.cls,
            "sep": self.sep,
            "mask": self.mask,
        }


SPECIALS = {
    "wordpiece": SpecialTokens(
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    ),
    # RoBERTa's ids: <s>=0 <pad>=1 </s>=2 <unk>=3; its <mask> comes last, here it is 4.
    "bpe": SpecialTokens(
        "<pad>", "<unk>", "<s>", "</s>", "<mask>", ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
    ),
    "unigram": SpecialTokens(
        "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]", ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")
    ),
}
# Real tokenizer.json files spell some roles differently (DeBERTa-v3 uses [PAD] and [UNK]).
SPECIAL_ALTERNATIVES = {"pad": ("[PAD]", "<pad>"), "unk": ("[UNK]", "<unk>")}


def special_added_tokens(family: str) -> list[AddedToken]:
    """The family's specials as `AddedToken`s, with the settings the released tokenizers use.

    Byte-level BPE's `<mask>` has `lstrip=True`, as in roberta-base: in "a <mask> of" the mask
    absorbs the space before it and stands where the whole token " the" (`Ġthe`) stood in
    pretraining. Without it, the space becomes a lone `Ġ` token that pretraining never shows.
    """
    sp = SPECIALS[family]
    return [
        AddedToken(
            t,
            lstrip=family == "bpe" and t == sp.mask,
            rstrip=False,
            single_word=False,
            normalized=False,
            special=True,
        )
        for t in sp.order
    ]


MODEL_TYPE_TO_FAMILY = {"WordPiece": "wordpiece", "BPE": "bpe", "Unigram": "unigram"}


def normalizer_for(family: str, lowercase: bool) -> normalizers.Normalizer:
    """BERT's cleanup (+ accent stripping when lowercasing); NFKC for SentencePiece style."""
    if family == "wordpiece":
        return normalizers.BertNormalizer(lowercase=lowercase)
    steps: list[normalizers.Normalizer] = [normalizers.NFKC()] if family == "unigram" else []
    if lowercase:
        steps.append(normalizers.Lowercase())
    if family == "unigram":
        steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    return normalizers.Sequence(steps)


def pre_tokenizer_for(family: str) -> pre_tokenizers.PreTokenizer:
    """How text is cut into words before subwords; word ids (whole-word masking) come from it."""
    if family == "wordpiece":
        return pre_tokenizers.BertPreTokenizer()  # whitespace and every punctuation mark
    if family == "bpe":
        # GPT-2's regex split into words, then bytes -> printable characters (Ġ = space).
        return pre_tokenizers.ByteLevel(add_prefix_space=False)
    # SentencePiece style: words keep their punctuation; "▁" marks a word start.
    return pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁")]
    )


def decoder_for(family: str) -> decoders.Decoder:
    if family == "wordpiece":
        return decoders.WordPiece(prefix="##")
    if family == "bpe":
        return decoders.ByteLevel()
    return decoders.Metaspace(replacement="▁")


def post_processor_for(family: str, tokenizer: Tokenizer) -> processors.PostProcessor:
    """The pair layout, stored in tokenizer.json so transformers reproduces it too."""
    sp = SPECIALS[family]
    cls_id, sep_id = tokenizer.token_to_id(sp.cls), tokenizer.token_to_id(sp.sep)
    if family == "bpe":
        # add_prefix_space=False as in roberta-base (the offsets of the first word differ).
        return processors.RobertaProcessing(
            (sp.sep, sep_id), (sp.cls, cls_id), trim_offsets=True, add_prefix_space=False
        )
    return processors.TemplateProcessing(
        single=f"{sp.cls}:0 $A:0 {sp.sep}:0",
        pair=f"{sp.cls}:0 $A:0 {sp.sep}:0 $B:1 {sp.sep}:1",
        special_tokens=[(sp.cls, cls_id), (sp.sep, sep_id)],
    )
