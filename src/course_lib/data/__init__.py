"""Data for pre-training: corpora, sentence pairs and input formats, padded masked batches.

From text to a masked batch, with nothing to download (a few seconds on a laptop)::

    import torch
    from course_lib.data import PretrainingCollator, build_pretraining_dataset, load_builtin_corpus
    from course_lib.objectives.masking import MaskingConfig
    from course_lib.tokenization import train_tokenizer

    corpus = load_builtin_corpus()          # CPython's own documentation prose, cached
    print(corpus.summary())                 # sizes + content hash, to compare with the course
    tokenizer = train_tokenizer("bert", corpus.texts("train"), vocab_size=8000)
    examples = build_pretraining_dataset(corpus.train, tokenizer, objective="mlm+nsp",
                                         max_length=128, seed=0)
    collate = PretrainingCollator(tokenizer, MaskingConfig(mlm_probability=0.15))
    batch = collate(examples[:8], generator=torch.Generator().manual_seed(0))
    # batch: input_ids, attention_mask, token_type_ids, labels (-100 = not a target),
    #        next_sentence_label
    print(tokenizer.decode(batch["input_ids"][0], skip_special_tokens=False))

For a DataLoader, pass `collate_fn=collate` (dynamic masking, new masks every epoch) or wrap
the examples in `StaticMaskedDataset(examples, collate, duplicates=10)` (BERT's fixed masks).
"""

from course_lib.data.builtin_corpus import default_cache_dir, load_builtin_corpus
from course_lib.data.collator import PretrainingCollator, StaticMaskedDataset
from course_lib.data.corpus import (
    Corpus,
    Document,
    load_hf_dataset,
    load_text_corpus,
    split_documents,
    split_sentences,
)
from course_lib.data.pairs import (
    FORMATS,
    OBJECTIVES,
    Examples,
    build_pretraining_dataset,
    make_format_examples,
    make_mlm_examples,
    make_nsp_examples,
    make_sop_examples,
    tokenize_documents,
)

__all__ = [
    "FORMATS",
    "OBJECTIVES",
    "Corpus",
    "Document",
    "Examples",
    "PretrainingCollator",
    "StaticMaskedDataset",
    "build_pretraining_dataset",
    "default_cache_dir",
    "load_builtin_corpus",
    "load_hf_dataset",
    "load_text_corpus",
    "make_format_examples",
    "make_mlm_examples",
    "make_nsp_examples",
    "make_sop_examples",
    "split_documents",
    "split_sentences",
    "tokenize_documents",
]
