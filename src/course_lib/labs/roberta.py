"""Mechanism labs of chapter 02 (RoBERTa).

dynamic_vs_static_masking: RoBERTa's dynamic masking (a fresh mask every time a sequence is fed)
against BERT's static masking (masks drawn once, while preparing the data), on a small corpus
seen for many epochs. Both arms use the course's own pipelines, `PretrainingCollator` (dynamic)
and `StaticMaskedDataset` (static, one masked copy); the model, data, masking rate and steps are
the same, only *when* the mask is drawn differs.
"""

from __future__ import annotations

from typing import Any

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from torch import Tensor

from course_lib.config import RobertaConfig, tiny_config
from course_lib.data.collator import PretrainingCollator, StaticMaskedDataset
from course_lib.labels import IGNORE_INDEX
from course_lib.labs.core import choose, fit, lab, seed_everything
from course_lib.models.roberta import RobertaForMaskedLM
from course_lib.objectives.masking import MaskingConfig
from course_lib.tokenization.families import special_added_tokens
from course_lib.tokenization.tokenizer import CourseTokenizer
from course_lib.tokenization.train import train_tokenizer

# ----- dynamic_vs_static_masking ------------------------------------------------------------

N_SPECIAL = 5  # <s> <pad> </s> <unk> <mask>, ids 0..4 as in the course's byte-level BPE
N_SYMBOLS = 64  # content tokens 5..68
PAIRS = 4  # pairs per sequence: 8 content tokens between <s> and </s>


def symbol_tokenizer(n_symbols: int = N_SYMBOLS) -> CourseTokenizer:
    """A word-level CourseTokenizer over the words s0 ... s{n-1} with RoBERTa's five specials
    (ids 0..4), so the library's collator and static dataset can mask the synthetic language."""
    order = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
    vocab = {tok: i for i, tok in enumerate(order)}
    vocab.update({f"s{i}": N_SPECIAL + i for i in range(n_symbols)})
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.add_special_tokens(special_added_tokens("bpe"))
    return CourseTokenizer(backend, "roberta")


def sample_pair_sequences(
    perm: Tensor, count: int, pairs: int, generator: torch.Generator
) -> list[dict[str, list[int]]]:
    """`count` examples of the pair language, each <s> a1 b1 a2 b2 ... </s> with a = perm[b]:
    every content token is a function of its pair partner (perm is a bijection), so a masked
    token can be recovered from context, but only by a model that has learned that entry of
    perm (or of its inverse)."""
    b = torch.randint(0, len(perm), (count, pairs), generator=generator)
    content = torch.stack([perm[b], b], dim=-1).reshape(count, 2 * pairs) + N_SPECIAL
    bos, eos = 0, 2
    return [{"input_ids": [bos, *row.tolist(), eos]} for row in content]


def static_batches(
    examples: list[dict[str, list[int]]], collator: PretrainingCollator, seed: int
) -> StaticMaskedDataset:
    """BERT's pipeline with one copy: each example's mask is drawn once and kept forever."""
    return StaticMaskedDataset(examples, collator, duplicates=1, seed=seed)


def masked_batch(
    examples: list[dict[str, list[int]]],
    rows: Tensor,
    collator: PretrainingCollator,
    static: StaticMaskedDataset | None,
    generator: torch.Generator,
) -> dict[str, Tensor]:
    """The batch of `rows`: masks fixed in advance (`static` given) or drawn now (dynamic)."""
    if static is not None:
        return collator([static[int(i)] for i in rows])  # already masked: the collator pads
    return collator([examples[int(i)] for i in rows], generator=generator)


def train_masking_arm(
    seed: int, dynamic: bool, steps: int, batch: int, n_train: int, device: torch.device
) -> dict[str, Any]:
    """Train one arm on the seed's small corpus; returns the model, its tokenizer, the language
    (perm), the training examples and, for the static arm, the fixed masks it trained on."""
    tokenizer = symbol_tokenizer()
    perm = torch.randperm(N_SYMBOLS, generator=torch.Generator().manual_seed(10_000 + seed))
    data = torch.Generator().manual_seed(20_000 + seed)
    train = sample_pair_sequences(perm, n_train, PAIRS, data)
    collator = PretrainingCollator(tokenizer, MaskingConfig())  # 15%; 80/10/10 as in BERT
    static = None if dynamic else static_batches(train, collator, seed)
    generator = seed_everything(seed)  # same weights and batch order in both arms
    config = tiny_config(
        RobertaConfig,
        tokenizer.vocab_size,
        hidden_size=64,
        layers=1,
        max_positions=2 * PAIRS + 4,
        initializer_range=0.1,
    )
    model = RobertaForMaskedLM(config).to(device)

    def step_loss(_step: int) -> Tensor:
        rows = torch.randint(0, n_train, (batch,), generator=generator)
        masked = masked_batch(train, rows, collator, static, generator)
        # With labels the model projects only the masked positions and returns the MLM loss.
        return model(masked["input_ids"].to(device), labels=masked["labels"].to(device)).loss

    fit(model, step_loss, steps, lr=5e-3)
    return {"model": model, "tokenizer": tokenizer, "perm": perm, "train": train, "static": static}


def masked_token_accuracy(
    model: RobertaForMaskedLM, batch: dict[str, Tensor], device: torch.device
) -> float:
    """Share of the batch's targets (labels != -100) that the model predicts exactly."""
    with torch.no_grad():
        logits = model(batch["input_ids"].to(device)).mlm_logits  # (B, T, V)
    labels = batch["labels"].to(device)
    chosen = labels != IGNORE_INDEX
    return float((logits.argmax(-1)[chosen] == labels[chosen]).float().mean())


def held_out_accuracy(arm: dict[str, Any], seed: int, device: torch.device) -> float:
    """Masked-token accuracy on 512 new sequences of the arm's language, 15% of the tokens
    replaced by <mask> (the same masks for both arms of a seed)."""
    test = sample_pair_sequences(
        arm["perm"], 512, PAIRS, torch.Generator().manual_seed(30_000 + seed)
    )
    evaluate = PretrainingCollator(
        arm["tokenizer"], MaskingConfig(mask_replace_prob=1.0, random_replace_prob=0.0)
    )
    batch = evaluate(test, generator=torch.Generator().manual_seed(40_000 + seed))
    return masked_token_accuracy(arm["model"], batch, device)


def _masking_accuracy(
    seed: int, dynamic: bool, steps: int, batch: int, n_train: int, device: torch.device
) -> float:
    arm = train_masking_arm(seed, dynamic, steps, batch, n_train, device)
    return held_out_accuracy(arm, seed, device)


@lab("02_roberta", arms=("dynamic", "static"), expected_sign="+")
def dynamic_vs_static_masking(seed: int, preset: str, device: torch.device) -> dict[str, float]:
    """Does drawing a fresh mask every epoch matter when a small corpus is seen many times?
    Held-out masked-token accuracy after many epochs over 128 sequences.

    Metric: held-out masked-token accuracy (chance 1/256)

    Paper: RoBERTa (Liu et al. 2019) Table 1, BERT-base: static masking 78.3 / 84.3 / 92.5,
    dynamic 78.7 / 84.0 / 92.9 (SQuAD 2.0 F1 / MNLI-m / SST-2): comparable or slightly better;
    static there meant 10 masked copies over 40 epochs.

    Why: Every token is a function of its pair partner through a random permutation that can
    only be learned from masked examples. With one fixed mask, each training sequence only ever
    asks about its 15% of positions, so entries of the permutation that no fixed mask covers are
    never learned, and the model can fit its training loss by memorising those few answers;
    fresh masks ask about every entry in turn."""
    steps = choose(preset, fast=150, live=300, full=400, gpu=1000)
    batch = choose(preset, fast=64)
    n_train = choose(preset, fast=128)
    return {
        "dynamic": _masking_accuracy(seed, True, steps, batch, n_train, device),
        "static": _masking_accuracy(seed, False, steps, batch, n_train, device),
    }


# ----- byte_bpe_vs_wordpiece -----------------------------------------------------------------

CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"
# Letters the tokenizers never see in training: Greek α..ο, two UTF-8 bytes each (0xCE 0xB1..BF).
UNSEEN = "αβγδεζηθικλμνξο"
N_KEYS = 32  # keys k_i and values v_i = g(k_i); half of the values end with an unseen letter
CLAUSES = 4  # clauses "k v ." per sentence


def make_lexicon(generator: torch.Generator) -> tuple[list[str], list[str]]:
    """(keys, values): 2 * N_KEYS distinct two-syllable words (CVCV) over ASCII letters; then
    half of the values, chosen at random, get one letter of `UNSEEN` appended ("kamo" ->
    "kamoδ"). Value i belongs to key i."""
    syllables = [c + v for c in CONSONANTS for v in VOWELS]
    words: list[str] = []
    while len(words) < 2 * N_KEYS:
        i, j = torch.randint(0, len(syllables), (2,), generator=generator).tolist()
        word = syllables[i] + syllables[j]
        if word not in words:
            words.append(word)
    keys, values = words[:N_KEYS], words[N_KEYS:]
    marked = torch.randperm(N_KEYS, generator=generator)[: N_KEYS // 2].tolist()
    letters = torch.randint(0, len(UNSEEN), (N_KEYS,), generator=generator).tolist()
    values = [v + UNSEEN[letters[i]] if i in marked else v for i, v in enumerate(values)]
    return keys, values


def sample_sentences(
    keys: list[str], values: list[str], count: int, generator: torch.Generator
) -> list[str]:
    """`count` sentences "k v . k v . ..." of CLAUSES clauses with random keys: each value is
    the word of its key and each key the word of its value, so a masked word is recoverable
    from its clause partner, if the tokenizer can write the partner down."""
    picks = torch.randint(0, len(keys), (count, CLAUSES), generator=generator).tolist()
    return [" ".join(f"{keys[i]} {values[i]} ." for i in row) for row in picks]


def without_unseen(text: str) -> str:
    """The same text with the UNSEEN letters deleted: what the tokenizers are trained on (text
    written without those characters, as "cafe" for "café")."""
    return text.translate({ord(c): None for c in UNSEEN})


def word_pieces(tokenizer: CourseTokenizer, word: str) -> list[int]:
    """The ids of one word as it stands inside a sentence (byte-level BPE: with its space)."""
    text = " " + word if tokenizer.family == "bpe" else word
    return tokenizer.encode_pieces([text])[0][0]


def encode_sentences(
    tokenizer: CourseTokenizer, sentences: list[str]
) -> list[dict[str, list[int]]]:
    """Examples {"input_ids", "word_ids"} with the family's specials around each sentence; one
    word id per space-separated word (whole-word masking hides all its pieces together)."""
    cache: dict[str, list[int]] = {}
    examples = []
    for sentence in sentences:
        ids, words = [tokenizer.cls_token_id], [-1]
        for w, word in enumerate(sentence.split()):
            if word not in cache:
                cache[word] = word_pieces(tokenizer, word)
            ids += cache[word]
            words += [w] * len(cache[word])
        examples.append({"input_ids": ids + [tokenizer.sep_token_id], "word_ids": words + [-1]})
    return examples


def unknown_rate(tokenizer: CourseTokenizer, words: list[str]) -> float:
    """Share of the words whose pieces contain the unknown token ([UNK] / <unk>)."""
    return sum(tokenizer.unk_token_id in word_pieces(tokenizer, w) for w in words) / len(words)


def lossless_rate(tokenizer: CourseTokenizer, words: list[str]) -> float:
    """Share of the words that decode back to exactly themselves."""
    return sum(tokenizer.decode(word_pieces(tokenizer, w)).strip() == w for w in words) / len(words)


def _word_recovery(
    seed: int,
    family: str,
    steps: int,
    batch: int,
    device: torch.device,
    layers: int = 2,
    hidden: int = 64,
    lr: float = 5e-3,
) -> float:
    """Train one tokenizer and one tiny RoBERTa MLM on the seed's text; share of held-out masked
    words whose every piece is predicted exactly (a word written as [UNK] is never recovered)."""
    lexicon = torch.Generator().manual_seed(10_000 + seed)
    keys, values = make_lexicon(lexicon)
    tokenizer_text = [without_unseen(s) for s in sample_sentences(keys, values, 400, lexicon)]
    tokenizer = train_tokenizer(family, tokenizer_text, vocab_size=400)
    train = encode_sentences(tokenizer, sample_sentences(keys, values, 1024, lexicon))
    collator = PretrainingCollator(tokenizer, MaskingConfig(whole_word=True))
    generator = seed_everything(seed)
    config = tiny_config(
        RobertaConfig,
        tokenizer.vocab_size,
        hidden_size=hidden,
        layers=layers,
        max_positions=64,
        pad_token_id=tokenizer.pad_token_id,
        initializer_range=0.1,
    )
    model = RobertaForMaskedLM(config).to(device)

    def step_loss(_step: int) -> Tensor:
        rows = torch.randint(0, len(train), (batch,), generator=generator).tolist()
        masked = collator([train[i] for i in rows], generator=generator)
        ids, labels = masked["input_ids"].to(device), masked["labels"].to(device)
        return model(ids, attention_mask=masked["attention_mask"].to(device), labels=labels).loss

    fit(model, step_loss, steps, lr=lr)
    return masked_word_accuracy(
        model, tokenizer, sample_sentences(keys, values, 512, lexicon), seed, device
    )


def masked_word_accuracy(
    model: RobertaForMaskedLM,
    tokenizer: CourseTokenizer,
    sentences: list[str],
    seed: int,
    device: torch.device,
) -> float:
    """Mask every piece of one random key or value per sentence; a word counts as recovered
    when all its pieces are predicted exactly and none of them is the unknown token."""
    examples = encode_sentences(tokenizer, sentences)
    pick = torch.Generator().manual_seed(30_000 + seed)
    batch = PretrainingCollator(tokenizer, masking=None)(examples)
    ids = batch["input_ids"]
    word_ids = torch.full_like(ids, -1)
    for row, e in enumerate(examples):
        word_ids[row, : len(e["word_ids"])] = torch.tensor(e["word_ids"])
    # one word per sentence among the keys and values (word index w with w % 3 != 2)
    n_words = 3 * CLAUSES
    choice = torch.randint(0, 2 * CLAUSES, (len(examples),), generator=pick)
    target = (choice // 2) * 3 + choice % 2  # (B,)
    assert int(target.max()) < n_words
    hidden = word_ids == target[:, None]  # (B, T)
    inputs = ids.masked_fill(hidden, tokenizer.mask_token_id)
    with torch.no_grad():
        logits = model(
            inputs.to(device), attention_mask=batch["attention_mask"].to(device)
        ).mlm_logits  # (B, T, V)
    predicted = logits.argmax(-1).cpu()
    wrong = (hidden & (predicted != ids)).any(1)
    unknown = (hidden & (ids == tokenizer.unk_token_id)).any(1)
    return float((~wrong & ~unknown).float().mean())


@lab("02_roberta", arms=("byte_bpe", "wordpiece"), expected_sign="+")
def byte_bpe_vs_wordpiece(seed: int, preset: str, device: torch.device) -> dict[str, float]:
    """Does a tokenizer without unknown tokens matter when the text has letters its training
    text lacked? Held-out masked-word recovery, byte-level BPE vs WordPiece.

    Metric: held-out masked words recovered exactly (all pieces right, none unknown)

    Paper: RoBERTa (Liu et al. 2019) §4.4: a 50K byte-level BPE (GPT-2, Radford et al. 2019
    §2.2) encodes any text without unknown tokens; in early experiments it was slightly worse on
    some end tasks than BERT's 30K vocabulary, adopted for the universal encoding.

    Why: Both tokenizers are trained on the same text with the Greek letters deleted, and the
    same tiny RoBERTa is then trained on text where half of the values end with one (kamo ->
    kamoδ). WordPiece writes each such word as [UNK]: it can never be predicted, and its key
    partner loses its only clue; byte-level BPE spells it with two byte pieces, so every word
    stays learnable."""
    steps = choose(preset, fast=60, live=400, full=400, gpu=1000)
    batch = choose(preset, fast=32, live=64)
    return {
        "byte_bpe": _word_recovery(seed, "bpe", steps, batch, device),
        "wordpiece": _word_recovery(seed, "wordpiece", steps, batch, device),
    }
