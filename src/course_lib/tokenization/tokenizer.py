"""`CourseTokenizer`: one interface over a trained (or loaded) HF `tokenizers.Tokenizer`.

Special tokens are added here, not by the Rust post-processor, so the pair builders in
`course_lib.data.pairs` can assemble already-tokenized segments with exactly the same layout
(`build_inputs_with_special_tokens`). Word ids travel with the tokens: whole-word masking
needs to know which pieces belong to one word.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Encoding, Tokenizer

from course_lib.tokenization.families import (
    MODEL_TYPE_TO_FAMILY,
    SPECIAL_ALTERNATIVES,
    SPECIALS,
    canonical_family,
)

# Word id used for special tokens and padding (a real word id is >= 0).
NO_WORD = -1
# Offsets of special tokens and padding, as in transformers' offset_mapping.
NO_OFFSET = (0, 0)


def _text_problem(text: object, where: str) -> Exception | None:
    """Why `text` cannot be tokenized, as an exception naming the fix; None if it can."""
    if isinstance(text, str):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            return ValueError(
                f"{where} contains a lone surrogate {text[err.start]!r} at character "
                f"{err.start}, which is not valid Unicode; read the file with "
                "encoding='utf-8' (errors='replace' keeps the rest) or remove that character."
            )
        return None
    if isinstance(text, (bytes, bytearray)):
        return TypeError(f"{where} is bytes, not a string; decode it first: text.decode('utf-8').")
    return TypeError(
        f"{where} must be a string, not {type(text).__name__}; pass str(...) "
        "or leave the empty entries out."
    )


def truncate_longest_first(a: list[Any], b: list[Any] | None, budget: int) -> int:
    """Cut tokens off the end of the longer segment until both fit in `budget`.

    Works in place on `a` and `b` (and returns how many tokens were removed), like
    transformers' truncation="longest_first": both segments survive as long as possible.
    """
    removed = 0
    while len(a) + (len(b) if b is not None else 0) > budget:
        if b is not None and len(b) > len(a):
            b.pop()
        else:
            a.pop()
        removed += 1
    return removed


def special_token_id(role: str, doc: str | None = None) -> property:
    """A read-only `<role>_token_id` property: the id of the tokenizer's `role` special token
    ("pad", "cls", ...), so the five roles share one definition."""

    def token_id(tokenizer: CourseTokenizer) -> int:
        return tokenizer._id(role)

    return property(token_id, doc=doc or f"The id of the {role!r} special token.")


class CourseTokenizer:
    """A WordPiece, byte-level BPE or Unigram tokenizer with BERT/RoBERTa/ALBERT layouts."""

    def __init__(self, tokenizer: Tokenizer, family: str) -> None:
        self.family = canonical_family(family)
        self.backend = tokenizer
        # The Rust post-processor stays set (for transformers), but we add specials ourselves.
        self.backend.no_truncation()
        self.backend.no_padding()
        roles = SPECIALS[self.family].as_dict
        self._special_tokens: dict[str, str] = {}
        for role, token in roles.items():
            candidates = (token, *SPECIAL_ALTERNATIVES.get(role, ()))
            found = next((t for t in candidates if tokenizer.token_to_id(t) is not None), None)
            if found is None:
                raise ValueError(
                    f"This {self.family} tokenizer has no {role} token (looked for "
                    f"{candidates}); pass the right family=... or add the token."
                )
            self._special_tokens[role] = found
        if self.family == "bpe":
            self._mask_absorbs_space()

    def _mask_absorbs_space(self) -> None:
        """Give byte-level BPE's mask `lstrip=True`, as roberta-base ships it.

        "a <mask> of" then encodes as `Ġa <mask> Ġof`: the mask stands where a whole token
        like `Ġthe` stood in pretraining, not after a lone `Ġ` that pretraining never shows.
        Tokenizers saved before this setting existed are upgraded on load.
        """
        mask = self._special_tokens["mask"]
        added = {t.content: t for t in self.backend.get_added_tokens_decoder().values()}
        if mask in added and not added[mask].lstrip:
            old = added[mask]
            self.backend.add_special_tokens(
                [
                    AddedToken(
                        mask,
                        lstrip=True,
                        rstrip=old.rstrip,
                        single_word=old.single_word,
                        normalized=old.normalized,
                        special=True,
                    )
                ]
            )

    # ----- special tokens --------------------------------------------------------------------

    def _id(self, role: str) -> int:
        return int(self.backend.token_to_id(self._special_tokens[role]))

    pad_token_id = special_token_id("pad")
    unk_token_id = special_token_id("unk")
    cls_token_id = special_token_id("cls", "[CLS] for BERT/ALBERT, <s> for RoBERTa.")
    sep_token_id = special_token_id("sep", "[SEP] for BERT/ALBERT, </s> for RoBERTa.")
    mask_token_id = special_token_id("mask")

    @property
    def mask_token(self) -> str:
        return self._special_tokens["mask"]

    @property
    def pad_token(self) -> str:
        return self._special_tokens["pad"]

    @property
    def special_tokens(self) -> dict[str, str]:
        """Role -> token string, e.g. {"cls": "[CLS]", ...}."""
        return dict(self._special_tokens)

    @property
    def special_ids(self) -> list[int]:
        """Ids never masked nor used as random replacements: the five roles + added specials."""
        ids = {self._id(role) for role in self._special_tokens}
        ids |= {i for i, tok in self.backend.get_added_tokens_decoder().items() if tok.special}
        return sorted(ids)

    @property
    def vocab_size(self) -> int:
        return int(self.backend.get_vocab_size(with_added_tokens=True))

    def __len__(self) -> int:
        return self.vocab_size

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        """2 for one segment; 3 for a pair ([CLS] A [SEP] B [SEP]), 4 for RoBERTa's pair."""
        return len(self.build_inputs_with_special_tokens([], [] if pair else None)[0])

    # ----- layouts ---------------------------------------------------------------------------

    def build_inputs_with_special_tokens(
        self, ids_a: Sequence[int], ids_b: Sequence[int] | None = None
    ) -> tuple[list[int], list[int]]:
        """Add the family's specials around one or two segments; returns (input_ids, types).

        BERT/ALBERT: [CLS] A [SEP] B [SEP] with token_type_ids 0...0 1...1.
        RoBERTa: <s> A </s></s> B </s> with token_type_ids all 0 (it has no segment embedding).
        """
        cls, sep = self.cls_token_id, self.sep_token_id
        input_ids = [cls, *ids_a, sep]
        types = [0] * len(input_ids)
        if ids_b is not None:
            if self.family == "bpe":
                tail = [sep, *ids_b, sep]
                types += [0] * len(tail)
            else:
                tail = [*ids_b, sep]
                types += [1] * len(tail)
            input_ids += tail
        return input_ids, types

    def build_word_ids(
        self, word_ids_a: Sequence[int], word_ids_b: Sequence[int] | None = None
    ) -> list[int]:
        """Word ids laid out like `build_inputs_with_special_tokens`; specials get -1.

        Segment B's word ids are shifted past A's, so no word spans the two segments.
        """
        offset = max(word_ids_a, default=-1) + 1
        b = [w + offset if w >= 0 else w for w in word_ids_b] if word_ids_b is not None else None
        layout = [NO_WORD, *word_ids_a, NO_WORD]
        if b is not None:
            layout += ([NO_WORD] if self.family == "bpe" else []) + [*b, NO_WORD]
        return layout

    # ----- encoding --------------------------------------------------------------------------

    def _encodings(self, texts: Sequence[str], what: str = "text") -> list[Encoding]:
        """Rust encodings without special tokens; a bad text gets a clear error, not Rust's."""
        texts = list(texts)
        try:
            return self.backend.encode_batch(texts, add_special_tokens=False)
        except (TypeError, ValueError) as err:
            for i, text in enumerate(texts):
                where = what if len(texts) == 1 else f"{what} {i}"
                problem = _text_problem(text, where)
                if problem is not None:
                    raise problem from None
            raise err

    def encode_pieces(self, texts: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """(ids, word ids) per text, without special tokens; batched in Rust for speed."""
        if isinstance(texts, str):
            raise TypeError("encode_pieces takes a list of texts; wrap one text in a list.")
        return [
            (list(e.ids), [w if w is not None else NO_WORD for w in e.word_ids])
            for e in self._encodings(texts)
        ]

    def _assemble(
        self,
        a: tuple[list[int], list[int]],
        b: tuple[list[int], list[int]] | None,
        max_length: int | None,
        truncation: bool,
        add_special_tokens: bool,
    ) -> dict[str, list[int]]:
        ids_a, words_a = list(a[0]), list(a[1])
        ids_b, words_b = (list(b[0]), list(b[1])) if b is not None else (None, None)
        if max_length is not None:
            n_special = self.num_special_tokens_to_add(b is not None) if add_special_tokens else 0
            budget = max_length - n_special
            if budget < (2 if b is not None else 1):
                raise ValueError(
                    f"max_length={max_length} cannot hold {'two segments' if b else 'any token'} "
                    f"plus {n_special} special tokens; use max_length >= "
                    f"{n_special + (2 if b is not None else 1)}."
                )
            if truncation:
                truncate_longest_first(ids_a, ids_b, budget)
                truncate_longest_first(words_a, words_b, budget)
        if add_special_tokens:
            input_ids, types = self.build_inputs_with_special_tokens(ids_a, ids_b)
            word_ids = self.build_word_ids(words_a, words_b)
        else:
            input_ids = ids_a + (ids_b or [])
            types = [0] * len(ids_a) + [1 if self.family != "bpe" else 0] * len(ids_b or [])
            offset = max(words_a, default=-1) + 1
            word_ids = words_a + [w + offset for w in (words_b or [])]
        return {
            "input_ids": input_ids,
            "token_type_ids": types,
            "attention_mask": [1] * len(input_ids),
            "word_ids": word_ids,
        }

    def encode(
        self,
        text: str,
        text_pair: str | None = None,
        max_length: int | None = None,
        truncation: bool = True,
        add_special_tokens: bool = True,
        return_offsets_mapping: bool = False,
    ) -> dict[str, list[Any]]:
        """Tokenize one text (or pair): input_ids, token_type_ids, attention_mask, word_ids.

        `return_offsets_mapping=True` adds "offset_mapping": (start, end) characters of each
        token in its own text, (0, 0) for special tokens, as transformers returns it.
        """
        if text_pair is None:
            encodings = self._encodings([text], "the text")
        else:
            encodings = self._encodings([text, text_pair], "text/text_pair")
        pieces = [
            (list(e.ids), [w if w is not None else NO_WORD for w in e.word_ids]) for e in encodings
        ]
        b = pieces[1] if text_pair is not None else None
        out = self._assemble(pieces[0], b, max_length, truncation, add_special_tokens)
        if return_offsets_mapping:
            offsets = [[tuple(o) for o in e.offsets] for e in encodings]
            off_a, off_b = offsets[0], offsets[1] if text_pair is not None else None
            if max_length is not None and truncation:
                n_special = (
                    self.num_special_tokens_to_add(b is not None) if add_special_tokens else 0
                )
                truncate_longest_first(off_a, off_b, max_length - n_special)
            if add_special_tokens:
                # The same layout as the ids: specials (word id -1) get (0, 0).
                flat = iter([*off_a, *(off_b or [])])
                ids = out["input_ids"]
                special = set(self._layout_special_positions(len(off_a), off_b))
                out["offset_mapping"] = [
                    NO_OFFSET if i in special else next(flat) for i in range(len(ids))
                ]
            else:
                out["offset_mapping"] = [*off_a, *(off_b or [])]
        return out

    def _layout_special_positions(self, len_a: int, off_b: list[Any] | None) -> list[int]:
        """Positions of the special tokens in `build_inputs_with_special_tokens`' layout."""
        markers = self.build_inputs_with_special_tokens(
            [-1] * len_a, None if off_b is None else [-1] * len(off_b)
        )[0]
        return [i for i, m in enumerate(markers) if m != -1]

    def batch_encode(
        self,
        texts: Sequence[str],
        text_pairs: Sequence[str] | None = None,
        max_length: int | None = None,
        padding: bool = True,
        truncation: bool = True,
        return_tensors: str | None = "pt",
    ) -> dict[str, Any]:
        """Encode many texts; pad to the longest (pad id, mask 0, word id -1) as tensors."""
        if isinstance(texts, str):
            raise TypeError("batch_encode takes a list of texts; use encode() for one text.")
        if text_pairs is not None and len(text_pairs) != len(texts):
            raise ValueError(f"Got {len(texts)} texts but {len(text_pairs)} text_pairs.")
        pieces_a = self.encode_pieces(texts)
        pieces_b = self.encode_pieces(text_pairs) if text_pairs is not None else None
        rows = [
            self._assemble(a, pieces_b[i] if pieces_b else None, max_length, truncation, True)
            for i, a in enumerate(pieces_a)
        ]
        keys = ("input_ids", "token_type_ids", "attention_mask", "word_ids")
        if return_tensors is None and not padding:
            return {k: [r[k] for r in rows] for k in keys}
        if return_tensors not in (None, "pt"):
            raise ValueError(f"return_tensors={return_tensors!r} is unsupported; use 'pt' or None.")
        if not padding and len({len(r["input_ids"]) for r in rows}) > 1:
            raise ValueError("Texts have different lengths; tensors need padding=True.")
        width = max((len(r["input_ids"]) for r in rows), default=0)
        fill = {
            "input_ids": self.pad_token_id,
            "token_type_ids": 0,
            "attention_mask": 0,
            "word_ids": NO_WORD,
        }
        padded = {k: [r[k] + [fill[k]] * (width - len(r[k])) for r in rows] for k in keys}
        if return_tensors is None:
            return padded
        return {
            k: torch.tensor(v, dtype=torch.long).reshape(len(rows), width)
            for k, v in padded.items()
        }

    def tokenize(self, text: str) -> list[str]:
        """Subword strings of a text, without special tokens."""
        return list(self._encodings([text], "the text")[0].tokens)

    def _check_ids(self, ids: Sequence[Any], what: str) -> list[int]:
        """Ids as Python ints, each a row of this vocabulary, or one clear error."""
        size = self.vocab_size
        out = []
        for position, i in enumerate(ids):
            if isinstance(i, bool) or not isinstance(i, numbers.Integral):
                raise TypeError(
                    f"{what} got {i!r} ({type(i).__name__}) at position {position}; token ids "
                    "are integers (pass input_ids, not text or scores)."
                )
            if not 0 <= int(i) < size:
                raise ValueError(
                    f"{what} got id {int(i)} at position {position}, outside this tokenizer's "
                    f"vocabulary 0..{size - 1}; were the ids made with another tokenizer "
                    "or a model with a larger vocabulary?"
                )
            out.append(int(i))
        return out

    def decode(self, ids: Sequence[int] | torch.Tensor, skip_special_tokens: bool = True) -> str:
        """Text of a list of ids (a 1-D tensor or array works too); specials dropped by default."""
        if hasattr(ids, "tolist") and hasattr(ids, "shape"):  # a torch tensor or numpy array
            if len(ids.shape) > 1:
                raise ValueError(
                    f"decode takes one sequence of ids, got shape {tuple(ids.shape)}; "
                    "decode each row: [tokenizer.decode(row) for row in ids]."
                )
            ids = ids.tolist()
        if isinstance(ids, numbers.Integral):
            ids = [ids]
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise TypeError(f"decode takes a list of token ids, not {type(ids).__name__}.")
        checked = self._check_ids(ids, "decode")
        return self.backend.decode(checked, skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):
            return self.backend.id_to_token(self._check_ids([ids], "convert_ids_to_tokens")[0])
        return [self.backend.id_to_token(i) for i in self._check_ids(ids, "convert_ids_to_tokens")]

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """Unknown tokens map to the unk id, as in transformers."""

        def one(token: str) -> int:
            found = self.backend.token_to_id(token)
            return self.unk_token_id if found is None else int(found)

        return one(tokens) if isinstance(tokens, str) else [one(t) for t in tokens]

    def get_vocab(self) -> dict[str, int]:
        return self.backend.get_vocab(with_added_tokens=True)

    # ----- persistence -----------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write tokenizer.json (into a folder, or to a path ending in .json); returns the file."""
        target = Path(path)
        if target.suffix != ".json":
            target.mkdir(parents=True, exist_ok=True)
            target = target / "tokenizer.json"
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
        self.backend.save(str(target))
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str], family: str | None = None) -> CourseTokenizer:
        """Load what `save` wrote (a folder with tokenizer.json, or the file itself)."""
        target = Path(path)
        if target.is_dir():
            target = target / "tokenizer.json"
        return cls.from_file(target, family=family)

    @classmethod
    def from_file(
        cls, tokenizer_json_path: str | os.PathLike[str], family: str | None = None
    ) -> CourseTokenizer:
        """Wrap any tokenizer.json, e.g. bert-base-uncased's; family inferred from its model."""
        path = Path(tokenizer_json_path)
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist; pass the path of a tokenizer.json.")
        try:
            backend = Tokenizer.from_file(str(path))
        except Exception as err:  # the Rust parser's message names neither the file nor a fix
            raise ValueError(
                f"{path} is not a valid tokenizer.json ({err}); it may be damaged or another "
                "kind of file: restore it from the run that trained it, or train a new tokenizer."
            ) from None
        if family is None:
            model_type = type(backend.model).__name__
            if model_type not in MODEL_TYPE_TO_FAMILY:
                raise ValueError(
                    f"{path} uses a {model_type} model; pass family='wordpiece', 'bpe' or "
                    "'unigram' to say which layout to use."
                )
            family = MODEL_TYPE_TO_FAMILY[model_type]
        return cls(backend, family)

    def to_transformers(self, model_max_length: int | None = None) -> Any:
        """A transformers fast tokenizer that encodes exactly like this one, for export.

        It wraps a copy of the same Rust pipeline (tokenizer.json), so ids, offsets, the pair
        layout and every special token's settings (RoBERTa's `<mask>` with lstrip=True) are
        the course's; `save_pretrained` + `AutoTokenizer.from_pretrained` keep them, and
        `pipeline("fill-mask")` sees the same inputs as `course fill-mask`. Pass the model's
        `model_max_length` (e.g. max_position_embeddings, minus 2 for RoBERTa) to let
        truncation=True know it.
        """
        from transformers import PreTrainedTokenizerFast

        backend = Tokenizer.from_str(self.backend.to_str())
        added = {t.content: t for t in backend.get_added_tokens_decoder().values()}
        sp = {role: added.get(tok, tok) for role, tok in self._special_tokens.items()}
        extra: dict[str, Any] = {}
        if model_max_length is not None:
            extra["model_max_length"] = int(model_max_length)
        fast = PreTrainedTokenizerFast(
            tokenizer_object=backend,
            pad_token=sp["pad"],
            unk_token=sp["unk"],
            cls_token=sp["cls"],
            sep_token=sp["sep"],
            mask_token=sp["mask"],
            bos_token=sp["cls"] if self.family == "bpe" else None,
            eos_token=sp["sep"] if self.family == "bpe" else None,
            # RoBERTa has no segment embedding, so its tokenizer returns no token_type_ids.
            model_input_names=["input_ids", "attention_mask"]
            if self.family == "bpe"
            else ["input_ids", "token_type_ids", "attention_mask"],
            **extra,
        )
        return fast

    def __repr__(self) -> str:
        return (
            f"CourseTokenizer(family={self.family!r}, vocab_size={self.vocab_size}, "
            f"specials={self._special_tokens})"
        )
