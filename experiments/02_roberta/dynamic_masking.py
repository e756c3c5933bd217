"""Static vs dynamic masking (RoBERTa, Liu et al. 2019, section 4.1 and Table 1), in miniature.

BERT masked its data once, in preprocessing, duplicated 10 times with different masks, and
trained 40 epochs: every sentence was seen with the same mask 4 times. RoBERTa draws a new mask
every time a sequence is fed. Three arms, same data, same steps, same tiny RoBERTa:

- static-k1:  one fixed mask per sequence for the whole run (the extreme case);
- static-k10: BERT's pipeline, 10 masked copies (course_lib.data.StaticMaskedDataset);
- dynamic:    RoBERTa's, a fresh mask for every batch (course_lib.data.PretrainingCollator).

To reach BERT's 40 epochs within minutes on a CPU, the training set is a small subset of the
built-in corpus (--examples sequences of 64 tokens), so every arm sees it 40 times. Scored by
held-out masked-LM loss / accuracy on validation documents (fixed masks), and by the loss on the
training texts under fresh masks (did the model learn the text, or its particular masks?).

    python experiments/02_roberta/dynamic_masking.py            # full: results/dynamic_masking.*
    python experiments/02_roberta/dynamic_masking.py --fast --out /tmp/x   # seconds
"""

from __future__ import annotations

import random
import sys
import time

import roberta_common as common

from course_lib.data import PretrainingCollator, StaticMaskedDataset, make_format_examples

NAME = "dynamic_masking"
ARMS = ("static-k1", "static-k10", "dynamic")
LABELS = {
    "static-k1": "static, 1 mask",
    "static-k10": "static, k=10 (BERT)",
    "dynamic": "dynamic (RoBERTa)",
}
# RoBERTa Table 1 (BERT-base size, dev sets): SQuAD 2.0 F1, MNLI-m accuracy, SST-2 accuracy.
PAPER = {
    "source": "Liu et al. 2019, RoBERTa, Table 1 (BERT-base, 10 duplicates x 40 epochs)",
    "metrics": ["SQuAD 2.0 F1", "MNLI-m", "SST-2"],
    "reference (Devlin et al.)": [76.3, 84.3, 92.8],
    "static": [78.3, 84.3, 92.5],
    "dynamic": [78.7, 84.0, 92.9],
    "conclusion": "dynamic masking is comparable or slightly better than static",
}


def figure(payload: dict) -> object:
    data, seeds = payload["config"]["data"], len(payload["config"]["seeds"])
    return common.plot_arms(
        payload["runs"],
        ARMS,
        f"Static vs dynamic masking ({data['epochs']} "
        f"epochs over {data['train_examples']} sequences, {seeds} seeds)",
        labels=LABELS,
    )


def main(argv: list[str] | None = None) -> dict:
    args = common.parser(__doc__.splitlines()[0]).parse_args(argv)
    if args.replot:
        return common.replot(args.out, NAME, figure)
    if args.restat:
        return common.restat(args.out, NAME, figure)
    fast = args.fast
    seeds = args.seeds or (2 if fast else 3)
    workers = args.workers or (1 if fast else 2)
    examples_n = 48 if fast else 200
    epochs = 2 if fast else 40
    batch_size = 16
    steps = args.steps or epochs * examples_n // batch_size
    duplicates = 10
    max_length = 64
    model = common.TinyModel()
    lr = 1e-3

    start = time.perf_counter()
    data = common.build_data(
        max_length, max_documents=40 if fast else None, max_eval_examples=64 if fast else 256
    )
    pool = list(
        make_format_examples(data.corpus.train, data.tokenizer, max_length, format="full-sentences")
    )
    train = random.Random(0).sample(pool, examples_n)  # the same subset for every arm and seed
    collate = PretrainingCollator(data.tokenizer)
    config = model.config(data.tokenizer, max_length)
    fresh = {"train_fresh_masks": train}  # the training texts, masked anew (fixed eval masks)

    runs = []
    for seed in range(seeds):
        static = {
            k: StaticMaskedDataset(train, collate, duplicates=k, seed=seed) for k in (1, duplicates)
        }
        for arm, dataset in (
            ("static-k1", static[1]),
            ("static-k10", static[duplicates]),
            ("dynamic", train),
        ):
            runs.append(
                common.Run(
                    arm=arm,
                    seed=seed,
                    train=dataset,
                    collate=collate,
                    model_config=config,
                    steps=steps,
                    batch_size=batch_size,
                    lr=lr,
                    eval_every=max(1, steps // 10),
                    extra_eval=fresh,
                )
            )
    results = common.run_all(runs, data, workers)
    metrics = (
        "eval_mlm_loss",
        "eval_mlm_accuracy",
        "train_fresh_masks_mlm_loss",
        "final_train_loss",
    )
    summary = common.summarize(results, ARMS, metrics)
    comparisons = [
        common.paired_comparison(results, a, b, m)
        for a, b in (
            ("static-k10", "dynamic"),
            ("static-k1", "dynamic"),
            ("static-k1", "static-k10"),
        )
        for m in ("eval_mlm_loss", "eval_mlm_accuracy")
    ]
    payload = {
        "experiment": NAME,
        "question": "Does drawing a new mask every time (dynamic) beat BERT's fixed masks?",
        "mode": "fast" if fast else "full",
        "command": common.command_line(__file__, sys.argv[1:] if argv is None else argv),
        **common.environment(),
        "config": {
            "model": {
                "class": "RobertaForMaskedLM",
                **model.__dict__,
                "parameters": sum(
                    p.numel() for p in common.build_model(config, False, 0).parameters()
                ),
            },
            "training": {
                "steps": steps,
                "batch_size": batch_size,
                "lr": lr,
                "schedule": "linear, 6% warmup",
                "optimizer": "AdamW (0.9, 0.98)",
                "precision": "fp32",
            },
            "data": {
                **data.info,
                "train_examples": examples_n,
                "epochs": epochs,
                "format": "full-sentences",
                "static_duplicates": duplicates,
            },
            "seeds": list(range(seeds)),
        },
        "arms": {a: LABELS[a] for a in ARMS},
        "runs": results,
        "summary": summary,
        "comparisons": comparisons,
        "noise_rule": common.RULE,
        "paper": PAPER,
        "wall_s": round(time.perf_counter() - start, 1),
    }
    path = common.write_results(args.out, NAME, payload, figure(payload))
    print(common.describe(summary, "eval_mlm_loss"))
    print(f"wrote {path.name} and {NAME}.png in {payload['wall_s']:.0f} s")
    return payload


if __name__ == "__main__":
    main()
