"""Named pretraining recipes (model size + data + optimisation), and the model families the CLI knows.

A recipe is plain data, so `course pretrain --preset tiny` and a notebook build exactly the same
run. The choices of the default "tiny" recipe are explained next to each value: it has to learn
something a learner can see in 5 minutes on 2 CPU threads, which is a compute budget about a
million times smaller than BERT-base's (6·N·D: 6.9e13 vs 8.4e19 FLOPs), so almost every choice trades model capacity for steps.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_lib.data.corpus import StreamCorpus
from course_lib.training.engine import TrainingConfig


@dataclass(frozen=True)
class Family:
    """What the CLI needs to build one model family: config, model classes, tokenizer kind."""

    name: str  # the config's model_type
    mlm_model: str  # names in course_lib.models.MODEL_CLASSES
    pretraining_model: str | None  # MLM + a sentence-level head (NSP for BERT, SOP for ALBERT)
    # Config values a small recipe needs for this family, under the recipe's own sizes.
    model_defaults: dict[str, Any] = field(default_factory=dict)
    # Config values every recipe of this family must use, over the recipe's (ELECTRA: post-LN).
    model_overrides: dict[str, Any] = field(default_factory=dict)
    # Masking values over the recipe's (ELECTRA: no random tokens, the generator provides them).
    masking_overrides: dict[str, Any] = field(default_factory=dict)
    # The objective the family pretrains with: "mlm", or "rtd" (ELECTRA's only one).
    objective: str = "mlm"
    # ELECTRA: the generator's hidden size, FFN and heads as a fraction of the discriminator's.
    generator_size: float | None = None
    # The family's own recipes by name, where the shared ones do not fit its config (ModernBERT).
    recipes: dict[str, Recipe] = field(default_factory=dict)

    def config_cls(self) -> type:
        from course_lib.config import CONFIG_CLASSES

        return CONFIG_CLASSES[self.name]

    @property
    def tokenizer(self) -> str:
        """The tokenizer algorithm of the family (WordPiece, byte-level BPE or Unigram)."""
        from course_lib.tokenization import canonical_family

        return canonical_family(self.name)

    @property
    def objectives(self) -> tuple[str, ...]:
        """The objectives this family pretrains with (the first is its default)."""
        if self.objective != "mlm":
            return (self.objective,)
        return ("mlm", "mlm+nsp", "mlm+sop") if self.pretraining_model else ("mlm",)

    def model_class(self, objective: str) -> type:
        """The class `objective` trains; ValueError (one line) if the family has none."""
        from course_lib.models import MODEL_CLASSES

        if objective not in self.objectives:
            if objective == "rtd":
                raise ValueError(
                    "objective 'rtd' (replaced-token detection) trains an ELECTRA generator and "
                    "discriminator; use --family electra"
                )
            if self.objective == "rtd":
                raise ValueError(
                    f"the {self.name} family pretrains by replaced-token detection; use "
                    f"objective 'rtd' (its default), not {objective!r}"
                )
            raise ValueError(
                f"the {self.name} family has no sentence-level pretraining head; "
                f"use objective 'mlm' (as {self.name} itself was trained)."
            )
        if objective == "rtd":
            from course_lib.objectives.rtd import ElectraPretrainer

            return ElectraPretrainer
        name = self.mlm_model if objective == "mlm" else self.pretraining_model
        return MODEL_CLASSES[name]

    def build(self, objective: str, config: Any) -> Any:
        """A fresh model for `objective` (ELECTRA: generator + discriminator from `config`)."""
        cls = self.model_class(objective)
        if objective == "rtd":
            return cls.from_config(config, self.generator_size)
        return cls(config)

    def adapt(self, recipe: Recipe) -> Recipe:
        """`recipe` with this family's overrides (model, masking, objective); idempotent."""
        if not (self.model_overrides or self.masking_overrides or self.objective != "mlm"):
            return recipe
        return recipe.replace(
            model={**recipe.model, **self.model_overrides},
            masking={**recipe.masking, **self.masking_overrides},
            training={**recipe.training, "objective": self.objective},
        )


@dataclass(frozen=True)
class Recipe:
    """A complete pretraining setup: model sizes, tokenizer, sequence length, masking, optimiser."""

    name: str
    description: str
    model: dict[str, Any]
    vocab_size: int
    max_length: int
    masking: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    minutes: float = 5.0

    def model_config(
        self, family: Family, vocab_size: int, pad_token_id: int, **overrides: Any
    ) -> Any:
        """The family's config with this recipe's sizes and the tokenizer's actual vocabulary."""
        sizes = {**family.model_defaults, **self.model, **overrides}
        preset = sizes.pop("preset", None)
        cls = family.config_cls()
        sizes.update(vocab_size=vocab_size, pad_token_id=pad_token_id)
        sizes.setdefault("max_position_embeddings", max(self.max_length, 128))
        return cls.from_preset(preset, **sizes) if preset else cls(**sizes)

    def training_config(self, **overrides: Any) -> TrainingConfig:
        """This recipe's TrainingConfig; `overrides` (budget, device, output_dir...) win."""
        values = {"max_minutes": self.minutes, **self.training, **overrides}
        return TrainingConfig(**values)

    def replace(self, **changes: Any) -> Recipe:
        return dataclasses.replace(self, **changes)


# The default recipe, tuned for held-out masked-token accuracy after 5 minutes on 2 CPU threads
# (the built-in corpus: CPython docs prose, ~250k tokens). Depth and width were measured with
# results files (benchmarks/README.md, "Issue 21"); the other values against their neighbours in
# screening runs whose numbers were not kept (benchmarks/README.md says what was tried and how
# to rerun any of them with a results file).
TINY = Recipe(
    name="tiny",
    description="2 layers x 192 hidden, 32-token sequences, pre-LN, no dropout, lr 2e-3: "
    "5 minutes on 2 CPU threads",
    model=dict(
        # 2 x 192 (3 heads of 64, FFN 768): at a 5-minute budget a shallow, wider model learns
        # most per minute. It makes as many steps a minute as 4 x 128 and ends higher: 30.4% vs
        # 24.1% held-out accuracy in 5 minutes, 32.2% vs 29.9% and 32.4% vs 29.2% at 1,600 steps
        # (seeds 0 and 1); 8 x 96, 3 x 192 and 2 x 256 ended lower (fewer or slower steps).
        hidden_size=192,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=768,
        # Pre-LN keeps gradients well scaled through the stack from the first step (post-LN
        # learned more slowly at the same learning rate).
        pre_layer_norm=True,
        # No dropout (as in Cramming): the model sees the data a few times and underfits;
        # dropout only slows learning here.
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        # BERT's 0.02 suits width 768; at widths 128-192 it leaves the query-key products so
        # small that attention stays uniform for hundreds of steps. 0.043 ~ 0.6/sqrt(192).
        initializer_range=0.043,
    ),
    # 8000 WordPiece entries cover the corpus' frequent words whole (fill-mask answers are
    # words, not fragments) while keeping the tied embedding/output matrix at 1.5M parameters.
    vocab_size=8000,
    # 32 tokens broke a plateau: at 128 tokens every variant screened predicted frequent words
    # and copied the unmasked 10%, barely above the unigram model at [MASK] positions.
    # A model first learns to use the *nearby* words, and short sequences give it 4x the
    # examples per step and attention over few positions. BERT did the same at scale: 90% of
    # its steps at 128 tokens, the last 10% at 512; continue at a longer length to extend.
    max_length=32,
    masking=dict(mlm_probability=0.15),
    training=dict(
        objective="mlm",  # NSP/SOP cost steps and, per RoBERTa, do not help MLM
        # 64 x 32 = 2,048 tokens per step: twice BERT-style 16 x 128's steps per minute
        batch_size=64,
        lr=2e-3,  # both 1e-3 and 3e-3 learned more slowly in the screening runs
        warmup=0.06,
        schedule="linear",  # decays to 0 exactly when the time budget ends
        weight_decay=0.01,
        betas=(0.9, 0.98),
        max_grad_norm=1.0,
        precision="auto",  # bf16 autocast only where the CPU has native bf16 (detected)
        eval_every_minutes=1.0,
        eval_max_examples=512,
        log_every=10,
    ),
)

# The default on a CUDA GPU: the same 5 minutes buy hundreds of times more arithmetic than on 2
# CPU threads, enough for a wider, deeper model on BERT's 128-token sequences. NOT YET MEASURED
# on a GPU (none was available when it was written; `python benchmarks/accuracy_curve.py --preset
# small-gpu` on a GPU records its curve, and these values should follow that curve). Why each
# change from TINY, by arithmetic rather than measurement:
SMALL_GPU = TINY.replace(
    name="small-gpu",
    description="6 layers x 256 hidden, 128-token sequences, batch 128, dropout 0.1: "
    "5 minutes on a GPU (chosen automatically when CUDA is found)",
    model=dict(
        TINY.model,
        # 6 x 256 (4 heads of 64, FFN 1024): ~5x TINY's encoder FLOPs per token, still small
        # enough that a GPU runs thousands of steps in 5 minutes.
        hidden_size=256,
        num_hidden_layers=6,
        num_attention_heads=4,
        intermediate_size=1024,
        # At thousands of steps of 16k tokens the ~250k-token built-in corpus is seen hundreds
        # of times: BERT's dropout 0.1 is back, against memorising it.
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.04,  # ~0.6/sqrt(256), the rule TINY's 0.043 follows at width 192
    ),
    # 128 tokens: the length BERT pretrained 90% of its steps at; attention over longer context
    # is what the extra compute is for.
    max_length=128,
    training=dict(TINY.training, batch_size=128, lr=1e-3),  # 16k tokens per step
)

RECIPES: dict[str, Recipe] = {TINY.name: TINY, SMALL_GPU.name: SMALL_GPU}

# ModernBERT's config has its own fields (no pre_layer_norm: it is pre-LN by design; GeGLU, rotary
# positions, no biases, per-sublayer dropouts that default to 0), so it gets its own two recipes
# under the same names, trained the tiny recipe's way (same data, length, batch and optimiser).
# Its sizes and padding were measured (benchmarks/README.md, "Issue 44"; 1 thread, bf16 CPU):
MODERNBERT_TINY = TINY.replace(
    description="ModernBERT, 2 layers x 192 hidden, 32-token sequences, lr 2e-3: "
    "5 minutes on 2 CPU threads",
    model=dict(
        # 2 x 192 (3 heads of 64): at equal time it beat 4 x 128, 21.2% vs 19.4% held-out
        # accuracy in ~42 s (334 vs 300 steps; 4 x 128 was ahead per step, 19.4% vs 18.4% at
        # 300, but 11% slower per step). benchmarks/results/issue44/, one seed each.
        hidden_size=192,
        num_hidden_layers=2,
        num_attention_heads=3,
        # GeGLU's width as in ModernBERT-base (1152 = 1.5 x 768): the gate doubles Wi.
        intermediate_size=288,
        # ModernBERT's pattern, global every 3rd layer from layer 0: layer 0 global, layer 1
        # local. A window of 16 (8 tokens either side) is half of a 32-token sequence, so the
        # local layer is really local (ModernBERT-base: 128 of 8,192 tokens).
        global_attn_every_n_layers=3,
        local_attention=16,
        initializer_range=0.043,  # TINY's width rule (~0.6/sqrt(192)), same width
        # Padded: unpadding made forward+backward 1.35x slower at 64 x 32 tokens (78% real
        # tokens; packing costs more than the 22% it skips on a CPU), same outputs.
        unpad=False,
    ),
)
MODERNBERT_SMALL_GPU = SMALL_GPU.replace(
    description="ModernBERT, 6 layers x 256 hidden, 128-token sequences, batch 128: "
    "5 minutes on a GPU (chosen automatically when CUDA is found)",
    # NOT YET MEASURED on a GPU, as SMALL_GPU; its sizes and dropout by the same arithmetic.
    model=dict(
        hidden_size=256,
        num_hidden_layers=6,
        num_attention_heads=4,
        intermediate_size=384,
        global_attn_every_n_layers=3,
        local_attention=64,  # half the 128-token sequence, as the CPU recipe's 16 of 32
        initializer_range=0.04,
        attention_dropout=0.1,
        mlp_dropout=0.1,
        unpad=False,
    ),
)

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("bert", "BertForMaskedLM", "BertForPreTraining"),
        Family("roberta", "RobertaForMaskedLM", None),
        Family("albert", "AlbertForMaskedLM", "AlbertForPreTraining"),
        # 256 log-buckets need sequences far longer than 128 tokens; 64 suit max_length 128.
        Family("deberta", "DebertaForMaskedLM", None, {"position_buckets": 64}),
        Family("distilbert", "DistilBertForMaskedLM", None),
        Family(
            "electra",
            "ElectraForMaskedLM",
            None,
            # transformers' ELECTRA is post-LN, and only a post-LN discriminator exports to it
            # (course export: its logits checked against ElectraForPreTraining's).
            model_overrides={"pre_layer_norm": False},
            # ELECTRA's masking (objectives.rtd.ELECTRA_MASKING): 85% [MASK], 15% kept, no random
            # tokens: the generator's samples are the replacements.
            masking_overrides={"mask_replace_prob": 0.85, "random_replace_prob": 0.0},
            objective="rtd",
            # 1/3: ELECTRA-Base's ratio (the paper found 1/4 to 1/2 of the discriminator best,
            # section 3.2); on the tiny recipe's 3 heads of 64 it is one head: 64 hidden, FFN 256.
            generator_size=1 / 3,
        ),
        Family(
            "modernbert",
            "ModernBertForMaskedLM",
            None,
            recipes={"tiny": MODERNBERT_TINY, "small-gpu": MODERNBERT_SMALL_GPU},
        ),
    )
}


def default_recipe_name(device_type: str) -> str:
    """The recipe `course pretrain` uses when no --preset is given: 'small-gpu' on a CUDA GPU,
    'tiny' elsewhere (CPU, and Apple's MPS, whose throughput is nearer a CPU's for models this
    small)."""
    return SMALL_GPU.name if device_type == "cuda" else TINY.name


def get_recipe(name: str, family: str = "bert") -> Recipe:
    """A recipe by name, or the tiny recipe with a published size of the family (e.g. 'bert-mini')."""
    fam = FAMILIES.get(family)
    own = fam.recipes if fam is not None else {}
    if name in RECIPES:
        recipe = own.get(name, RECIPES[name])
        return fam.adapt(recipe) if fam is not None else recipe
    presets = fam.config_cls().presets if fam is not None else {}
    if name in presets:
        # The published sizes, trained the tiny recipe's way (pre-LN, no dropout).
        tiny = own.get(TINY.name, TINY)
        kept = {
            k: v
            for k, v in tiny.model.items()
            if "dropout" in k or k in ("pre_layer_norm", "unpad")
        }
        recipe = tiny.replace(
            name=name, description=f"{name} sizes, tiny recipe", model={"preset": name, **kept}
        )
        return fam.adapt(recipe)
    known = sorted(RECIPES) + sorted(presets)
    raise ValueError(f"unknown preset {name!r} for {family}; choose one of {known}.")


@dataclass
class PreparedRun:
    """Everything a recipe needs before training: model, tokenizer, examples, collator."""

    model: Any
    tokenizer: Any
    train: list
    held_out: list
    collator: Any
    corpus: Any
    # The Trainer's objective: None for the model's own loss, RTDObjective for ELECTRA.
    objective: Any = None
    # A streamed file corpus: the token stores the examples are read from (train, validation).
    stores: tuple = ()


def prepare_run(
    recipe: Recipe | str = "tiny",
    family: str = "bert",
    objective: str | None = None,
    corpus: Any | None = None,
    seed: int = 0,
    tokenizer: Any | None = None,
    log: Callable[[str], None] | None = None,
    store_dir: str | Path | None = None,
    progress: bool = False,
) -> PreparedRun:
    """Corpus -> tokenizer -> examples -> model, exactly as `course pretrain` does it.

    `objective` defaults to the recipe's (ELECTRA's: "rtd"). `corpus` defaults to the built-in one; pass `tokenizer` to reuse a trained one (resuming
    needs the checkpoint's own tokenizer, since retraining could change the ids). `log` receives
    the tokenizer trainer's lines (a sampled corpus, a capped alphabet).

    A `StreamCorpus` (a file corpus, read from disk) is tokenized once into token stores under
    `store_dir` and its examples are built from them on the fly (`stream_examples`); a
    `Corpus` in memory (the built-in one) goes through the list builders as before.
    """
    import torch

    from course_lib.data import PretrainingCollator, build_pretraining_dataset, load_builtin_corpus
    from course_lib.objectives import MaskingConfig
    from course_lib.tokenization import train_tokenizer

    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of {sorted(FAMILIES)}.")
    fam = FAMILIES[family]
    recipe = get_recipe(recipe, family) if isinstance(recipe, str) else fam.adapt(recipe)
    objective = objective or recipe.training.get("objective", "mlm")
    corpus = corpus if corpus is not None else load_builtin_corpus()
    stores: tuple = ()
    if isinstance(corpus, StreamCorpus):
        if store_dir is None:
            raise ValueError("a streamed corpus needs store_dir, the folder of its token stores")
        tokenizer, train, held_out, stores = stream_examples(
            corpus, fam.tokenizer, recipe, objective, seed, store_dir, tokenizer, log, progress
        )
    else:
        if tokenizer is None:
            # The sample of a large corpus is drawn with seed 0, not the run's: the tokenizer
            # depends on the corpus alone, so runs with other seeds share it (and its stores).
            tokenizer = train_tokenizer(
                fam.tokenizer, corpus.texts("train"), recipe.vocab_size, log=log
            )
        train = build_pretraining_dataset(
            corpus.train, tokenizer, objective, recipe.max_length, seed
        )
        held_out = build_pretraining_dataset(
            corpus.validation, tokenizer, objective, recipe.max_length, seed
        )
    config = recipe.model_config(fam, tokenizer.vocab_size, tokenizer.pad_token_id)
    torch.manual_seed(seed)
    model = fam.build(objective, config)
    collator = PretrainingCollator(tokenizer, MaskingConfig(**recipe.masking), seed=seed)
    trainer_objective = None
    if objective == "rtd":
        from course_lib.objectives.rtd import RTDObjective

        trainer_objective = RTDObjective()
    return PreparedRun(
        model, tokenizer, train, held_out, collator, corpus, trainer_objective, stores
    )


def tokenizer_path(
    corpus: StreamCorpus, tokenizer_family: str, vocab_size: int, store_dir: str | Path
) -> Path:
    """Where `corpus_tokenizer` keeps the tokenizer of a streamed corpus (a scanned one): keyed by
    corpus, family, size and the training sample's bound, so a later run finds it."""
    import hashlib

    from course_lib.tokenization.train import MAX_TRAINING_CHARS

    key = f"{corpus.split_key()}:{tokenizer_family}:{vocab_size}:{MAX_TRAINING_CHARS}"
    return Path(store_dir) / f"tokenizer-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def corpus_tokenizer(
    corpus: StreamCorpus,
    tokenizer_family: str,
    vocab_size: int,
    store_dir: str | Path,
    log: Callable[[str], None] | None = None,
    progress: bool = False,
) -> Any:
    """The tokenizer of a streamed corpus: trained as `train_tokenizer` trains it on the train
    texts (the same seeded sample beyond 10M characters, read in one pass), saved under
    `store_dir` keyed by corpus, family and size, and loaded from there by the next run.
    `progress`: bars while the sample is read and the tokenizer trained."""
    from course_lib.tokenization import CourseTokenizer, train_tokenizer
    from course_lib.tokenization.train import MAX_TRAINING_CHARS

    path = tokenizer_path(corpus, tokenizer_family, vocab_size, store_dir)
    if path.is_file():
        try:
            return CourseTokenizer.load(path, tokenizer_family)
        except Exception:  # damaged (the tokenizers library raises its own errors): train again
            path.unlink()
    sample, n_texts, total = corpus.tokenizer_sample(MAX_TRAINING_CHARS, progress=progress)
    if log is not None and len(sample) < n_texts:
        log(
            f"training on a seeded sample of {len(sample):,} of {n_texts:,} texts "
            f"({sum(map(len, sample)) / 1e6:.1f}M of {total / 1e6:.1f}M characters)"
        )
    tokenizer = train_tokenizer(
        tokenizer_family, sample, vocab_size, log=log, max_chars=None, progress=progress
    )
    del sample
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")  # .json: save writes one file
    try:
        tokenizer.save(tmp)
        os.replace(tmp, path)
    except BaseException:  # Ctrl-C included: no half file
        tmp.unlink(missing_ok=True)
        raise
    return tokenizer


def stream_examples(
    corpus: StreamCorpus,
    tokenizer_family: str,
    recipe: Recipe,
    objective: str,
    seed: int,
    store_dir: str | Path,
    tokenizer: Any | None = None,
    log: Callable[[str], None] | None = None,
    progress: bool = False,
) -> tuple[Any, Any, Any, tuple]:
    """(tokenizer, train, held-out, stores) of a streamed corpus: split scanned once, each
    split encoded once into a token store under `store_dir` (reused when it exists: a second
    run, --resume, course evaluate, every torchrun process), the objective's examples built
    from the stores on the fly (`token_store.pretraining_examples`: packed sentences for MLM
    and RTD, NSP or SOP pairs; the same examples as the list builders'). `progress`: a bar with
    MB/s while encoding (else `log` lines every 2 s)."""
    from course_lib.data.token_store import open_or_build, pretraining_examples

    store_dir = Path(store_dir)
    key = corpus.split_key()
    corpus.scan(store_dir, key)
    if tokenizer is None:
        tokenizer = corpus_tokenizer(
            corpus, tokenizer_family, recipe.vocab_size, store_dir, log, progress
        )
    stores = []
    for split in ("train", "validation"):
        bar = _EncodingBar(split, corpus, progress)
        try:
            store = open_or_build(
                store_dir,
                corpus.documents(split),
                tokenizer,
                name=split,
                log=None if progress else log,
                documents_fp=f"{key}:{split}",
                progress=bar.update,
            )
        finally:
            bar.close()
        stores.append(store)
    train, held_out = (
        pretraining_examples(s, tokenizer, objective, recipe.max_length, seed) for s in stores
    )
    return tokenizer, train, held_out, tuple(stores)


class _EncodingBar:
    """A tqdm bar in bytes (so it shows MB/s), opened at the first encoded batch: a store that
    already exists shows none."""

    def __init__(self, split: str, corpus: StreamCorpus, enabled: bool) -> None:
        self.split, self.enabled, self.bar = split, enabled, None
        mask = corpus.is_validation if split == "validation" else ~corpus.is_validation
        self.total = int(corpus.lengths[mask].sum()) if corpus.lengths is not None else None

    def update(self, n_bytes: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=self.total,
                desc=f"encoding {self.split}",
                unit="B",
                unit_scale=True,
                unit_divisor=1000,
            )
        self.bar.update(n_bytes)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
