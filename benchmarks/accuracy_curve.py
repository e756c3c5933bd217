"""Held-out masked-token accuracy of a recipe against wall-clock time (not a timed test).

Trains the recipe on the built-in corpus for --minutes, evaluating every --every minutes, then
prints the curve, the fill-mask hit rate on held-out sentences, and the two trivial baselines
(always the most frequent token; the unigram loss) for scale.

    python benchmarks/accuracy_curve.py                          # tiny recipe, 5 min, 2 threads
    python benchmarks/accuracy_curve.py --minutes 10 --every 1
    python benchmarks/accuracy_curve.py --steps 600              # a fixed step budget instead
    python benchmarks/accuracy_curve.py --set lr=2e-3 max_length=64 pre_layer_norm=False
    python benchmarks/accuracy_curve.py --corpus-fraction 0.25   # a quarter of the documents
    python benchmarks/accuracy_curve.py --short-first 17:0.5     # curriculum: half-length first
    python benchmarks/accuracy_curve.py --resegment 4            # the text cut 4 ways (blocks)
    python benchmarks/accuracy_curve.py --token-store            # examples read from a token store

Every run also writes benchmarks/results/accuracy_curve_<recipe>[_<N>steps or _<M>min]
[_corpus<F>][_short<L>for<F>][_blocks<K>][_store][_seed<S>].json (machine, torch version, threads, date,
command, recipe, every evaluation row, baselines, fill-mask rows): the numbers in
benchmarks/README.md cite these files. `--out DIR` writes elsewhere. A run stopped before its
budget (Ctrl-C) writes none.

Wall-clock results depend on the machine *and its load*: the load average is printed at the
start and the end; compare runs only under similar load (or compare fixed step budgets).
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import random
import sys
from collections import Counter
from pathlib import Path

import torch

from course_lib.data import PretrainingCollator, load_builtin_corpus
from course_lib.data.pairs import make_mlm_examples
from course_lib.objectives import MaskingConfig
from course_lib.training import Trainer, TrainingConfig
from course_lib.training.device import cpu_supports_bf16
from course_lib.training.inference import fill_mask_report, format_fill_mask_report
from course_lib.training.recipes import get_recipe, prepare_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_file import provenance, slug, write_results  # noqa: E402


def store_examples(run, max_length: int, seed: int) -> tuple:
    """The run's train and held-out examples read from token stores of its documents (the path
    of a file corpus), each store encoded into a temporary folder that lives as long as the run."""
    import atexit
    import shutil
    import tempfile

    from course_lib.data.token_store import open_or_build, pretraining_examples

    folder = tempfile.mkdtemp(prefix="accuracy-curve-stores-")
    atexit.register(shutil.rmtree, folder, True)
    return tuple(
        pretraining_examples(
            open_or_build(folder, docs, run.tokenizer, name), run.tokenizer, "mlm", max_length, seed
        )
        for name, docs in (("train", run.corpus.train), ("validation", run.corpus.validation))
    )


def baselines(run) -> tuple[float, float]:
    """Accuracy of always predicting the most frequent training token, and the unigram loss."""
    special = set(run.tokenizer.special_ids)
    counts = Counter(t for e in run.train for t in e["input_ids"] if t not in special)
    total = sum(counts.values())
    held = Counter(t for e in run.held_out for t in e["input_ids"] if t not in special)
    held_total = sum(held.values())
    top = counts.most_common(1)[0][0]
    # Unigram cross-entropy on held-out tokens (add-one smoothing for unseen ones).
    vocab = run.tokenizer.vocab_size
    loss = (
        -sum(n * math.log((counts[t] + 1) / (total + vocab)) for t, n in held.items()) / held_total
    )
    return held[top] / held_total, loss


def cut_example(example: dict, length: int, tokenizer) -> list[dict]:
    """One single-segment example as the fewest equal pieces of at most `length` tokens, each
    with its own [CLS] ... [SEP] (the same text, read in shorter windows; no 2-token scraps)."""
    ids, words = example["input_ids"][1:-1], example["word_ids"][1:-1]
    count = -(-len(ids) // (length - 2))  # pieces needed
    bounds = [round(i * len(ids) / count) for i in range(count + 1)]
    pieces = []
    for start, end in zip(bounds, bounds[1:]):
        input_ids, types = tokenizer.build_inputs_with_special_tokens(ids[start:end])
        word_ids = tokenizer.build_word_ids(words[start:end])
        pieces.append({"input_ids": input_ids, "token_type_ids": types, "word_ids": word_ids})
    return pieces


class ShortFirst:
    """A sequence-length curriculum around a collator: while the run's progress (set to the
    trainer's `progress` once it exists) is below `fraction`, each example is cut into windows
    of `length` tokens, so a step reads the same text in shorter sequences; then full length."""

    def __init__(self, collator, tokenizer, length: int, fraction: float) -> None:
        self.collator, self.tokenizer = collator, tokenizer
        self.length, self.fraction = length, fraction
        self.progress = lambda: 0.0
        self.short_batches = 0

    def __call__(self, examples, generator=None):
        if self.progress() < self.fraction:
            self.short_batches += 1
            examples = [p for e in examples for p in cut_example(e, self.length, self.tokenizer)]
        return self.collator(examples, generator=generator)


def resegmented(documents, tokenizer, max_length: int, ways: int) -> list[dict]:
    """The training text as contiguous blocks of max_length tokens, cut `ways` times at
    different offsets (0, 1/ways, 2/ways ... of a block): each epoch reads every token in
    `ways` different windows (data augmentation by re-segmentation). ways=1: plain blocks."""
    blocks = make_mlm_examples(documents, tokenizer, max_length)
    examples = list(blocks)
    if ways > 1:
        budget = max_length - 2
        stream = [t for e in blocks for t in e["input_ids"][1:-1]]
        words = [w for e in blocks for w in e["word_ids"][1:-1]]
        for k in range(1, ways):
            offset = k * budget // ways
            for start in range(offset, len(stream), budget):
                ids, types = tokenizer.build_inputs_with_special_tokens(
                    stream[start : start + budget]
                )
                examples.append(
                    {
                        "input_ids": ids,
                        "token_type_ids": types,
                        "word_ids": tokenizer.build_word_ids(words[start : start + budget]),
                    }
                )
    return examples


def apply_overrides(recipe, assignments: list[str]):
    """The recipe with `key=value` changes applied to its model, training or top-level fields."""
    model, training, masking, top = (
        dict(recipe.model),
        dict(recipe.training),
        dict(recipe.masking),
        {},
    )
    for item in assignments:
        key, sep, raw = item.partition("=")
        if not sep:
            raise SystemExit(f"--set expects KEY=VALUE, got {item!r}")
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        if key in ("max_length", "vocab_size", "minutes"):
            top[key] = value
        elif key in training or key in TrainingConfig.__dataclass_fields__:
            training[key] = value
        elif key in MaskingConfig.__dataclass_fields__:
            masking[key] = value
        else:
            model[key] = value
    if not assignments:
        return recipe
    return recipe.replace(
        name=f"{recipe.name}+" + ",".join(assignments),
        model=model,
        training=training,
        masking=masking,
        **top,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--minutes", type=float, default=None, help="default: the recipe's (5)")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--every", type=float, default=0.5, help="evaluate every N minutes")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--precision", default=None)
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--corpus-fraction",
        type=float,
        default=1.0,
        help="train on this share of the training documents (a fixed random subset; the "
        "held-out documents never change): accuracy against corpus size",
    )
    p.add_argument(
        "--short-first",
        default=None,
        metavar="LENGTH:FRACTION",
        help="sequence-length curriculum: the first FRACTION of the budget reads each sequence in "
        "equal windows of at most LENGTH tokens, then whole (17:0.5: halves of 32, first half)",
    )
    p.add_argument(
        "--resegment",
        type=int,
        default=0,
        metavar="K",
        help="train on contiguous blocks cut K ways at shifted offsets instead of packed "
        "sentences (K=1: blocks, one cut); the held-out set is unchanged",
    )
    p.add_argument(
        "--token-store",
        action="store_true",
        help="read the train and held-out examples from token stores (in a temporary folder), "
        "as `course pretrain --corpus FILE` does, instead of the in-memory lists",
    )
    p.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="override recipe values: model sizes (hidden_size=128), training (lr=2e-3), "
        "masking (whole_word=True), max_length=64 or vocab_size=4000; values are Python literals",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the results JSON (default: benchmarks/results)",
    )
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    base = get_recipe(args.preset)
    recipe = apply_overrides(base, args.set)
    header = provenance(args.threads)
    print(
        f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
        f"{args.threads} threads; CPU native bf16: {cpu_supports_bf16()}"
    )
    corpus = load_builtin_corpus(progress=False)
    if not 0 < args.corpus_fraction <= 1:
        raise SystemExit(f"--corpus-fraction must be in (0, 1], got {args.corpus_fraction}")
    if args.corpus_fraction < 1:
        # A random subset, not the first documents: the corpus is ordered by topic.
        keep = round(args.corpus_fraction * len(corpus.train))
        corpus.train = random.Random(0).sample(corpus.train, keep)
    run = prepare_run(recipe, "bert", "mlm", corpus, seed=args.seed)
    if args.token_store:
        run.train, run.held_out = store_examples(run, recipe.max_length, args.seed)
    if args.resegment:
        # Only the training examples change; the held-out set keeps the recipe's format.
        run.train = resegmented(run.corpus.train, run.tokenizer, recipe.max_length, args.resegment)
    collator = run.collator
    if args.short_first:
        length, _, fraction = args.short_first.partition(":")
        collator = ShortFirst(run.collator, run.tokenizer, int(length), float(fraction))
    overrides = dict(eval_every_minutes=args.every, eval_max_examples=None, seed=args.seed)
    if args.steps:
        overrides.update(
            max_steps=args.steps,
            max_minutes=None,
            eval_every_minutes=None,
            eval_every=max(1, args.steps // 10),
        )
    elif args.minutes:
        overrides["max_minutes"] = args.minutes
    if args.precision:
        overrides["precision"] = args.precision
    config = recipe.training_config(**overrides)
    # A masking lever (e.g. whole_word=True) changes what the model trains on, not the metric:
    # the held-out set is still scored with the default recipe's token-level masks.
    evaluation_masks = None
    if recipe.masking != base.masking:
        evaluation_masks = PretrainingCollator(
            run.tokenizer, MaskingConfig(**base.masking), seed=args.seed
        )
    trainer = Trainer(
        run.model,
        run.train,
        collator,
        config,
        eval_dataset=run.held_out,
        # The held-out set is always scored at full length with the recipe's masks.
        eval_collate_fn=evaluation_masks or run.collator,
    )
    if args.short_first:
        collator.progress = trainer.progress
    print(
        f"{recipe.name}: {run.model.config.num_hidden_layers} layers x {run.model.config.hidden_size}, "
        f"{sum(p.numel() for p in run.model.parameters()) / 1e6:.1f}M parameters, "
        f"{len(run.train)} train / {len(run.held_out)} held-out examples, precision {trainer.precision}"
    )
    history = trainer.train()
    if trainer.stop_reason not in ("max_steps", "time"):
        # Stopped early (Ctrl-C, a kill): its numbers are not the budget's, so no results file.
        raise SystemExit(
            f"stopped at step {trainer.step} ({trainer.stop_reason}) before the budget: "
            "no results file written"
        )
    print(f"\n{'minutes':>8} {'step':>6} {'MLM loss':>9} {'accuracy':>9}")
    for row in history:
        if "eval_mlm_accuracy" in row:
            print(
                f"{row['elapsed_s'] / 60:8.2f} {row['step']:6d} "
                f"{row['eval_mlm_loss']:9.3f} {row['eval_mlm_accuracy']:9.1%}"
            )
    top_accuracy, unigram_loss = baselines(run)
    print(
        f"baselines: most-frequent token {top_accuracy:.1%}, unigram loss {unigram_loss:.2f} nats"
    )
    sentences = [s for doc in run.corpus.validation for s in doc.sentences]
    rows = fill_mask_report(
        run.model,
        run.tokenizer,
        sentences,
        n=args.samples,
        seed=args.seed,
        max_tokens=recipe.max_length,
    )
    print(format_fill_mask_report(rows, "after training"))
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    name = f"accuracy_curve_{slug(recipe.name)}"
    if args.steps:
        name += f"_{args.steps}steps"
    elif args.minutes and args.minutes != recipe.minutes:
        name += f"_{args.minutes:g}min"  # the recipe's own budget keeps the plain name
    if args.corpus_fraction < 1:
        name += f"_corpus{args.corpus_fraction:g}"
    if args.short_first:
        name += "_short" + args.short_first.replace(":", "for")
    if args.resegment:
        name += f"_blocks{args.resegment}"
    if args.token_store:
        name += "_store"
    if args.seed:
        name += f"_seed{args.seed}"
    evals = [
        {
            "minutes": round(r["elapsed_s"] / 60, 3),
            "step": r["step"],
            "eval_mlm_loss": r["eval_mlm_loss"],
            "eval_mlm_accuracy": r["eval_mlm_accuracy"],
        }
        for r in history
        if "eval_mlm_accuracy" in r
    ]
    write_results(
        name,
        {
            **header,
            "benchmark": "accuracy_curve",
            "recipe": {
                "name": recipe.name,
                "model": dict(recipe.model),
                "training": dict(recipe.training),
                "masking": dict(recipe.masking),
                "max_length": recipe.max_length,
                "overrides": args.set,
            },
            "budget": {"steps": args.steps, "minutes": config.max_minutes, "every": args.every},
            "seed": args.seed,
            "corpus": {
                "fraction": args.corpus_fraction,
                "train_documents": len(run.corpus.train),
                "train_characters": sum(len(d.text) for d in run.corpus.train),
            },
            "data": {
                "short_first": args.short_first,
                "short_batches": getattr(collator, "short_batches", 0),
                "resegment": args.resegment,
                "token_store": args.token_store,
                "mean_train_tokens": sum(len(e["input_ids"]) for e in run.train) / len(run.train),
            },
            "precision": trainer.precision,
            "parameters": sum(p.numel() for p in run.model.parameters()),
            "train_sequences": len(run.train),
            "held_out_sequences": len(run.held_out),
            "rows": evals,
            "baselines": {
                "most_frequent_token_accuracy": top_accuracy,
                "unigram_loss": unigram_loss,
            },
            "fill_mask": {"hits": sum(r["hit"] for r in rows), "of": len(rows), "rows": rows},
        },
        args.out,
    )


if __name__ == "__main__":
    main()
