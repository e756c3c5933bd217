"""RoBERTa's four input formats, with and without NSP (Liu et al. 2019, section 4.2, Table 2).

- segment-pair (+NSP):  BERT's input, two multi-sentence segments, 50% from another document;
- sentence-pair (+NSP): single sentences as the two segments (short inputs);
- full-sentences:       whole sentences packed up to max_length, crossing document boundaries;
- doc-sentences:        the same, never crossing a document boundary.

All four train the same tiny RoBERTa; the pair formats add BERT's NSP head and loss. Equal
optimizer steps and (approximately) equal tokens: the batch size of each format is scaled by its
mean example length, as the paper did for sentence-pair. Every model is then scored on the same
held-out examples (validation documents packed into natural full-length blocks, fixed masks):
masked-LM loss and accuracy; the pair formats also report held-out NSP accuracy.

    python experiments/02_roberta/input_formats.py            # full: results/input_formats.*
    python experiments/02_roberta/input_formats.py --fast --out /tmp/x   # seconds
"""

from __future__ import annotations

import sys
import time

import roberta_common as common

from course_lib.data import PretrainingCollator, make_format_examples

NAME = "input_formats"
ARMS = ("segment-pair", "sentence-pair", "full-sentences", "doc-sentences")
NSP_FORMATS = ("segment-pair", "sentence-pair")
LABELS = {
    "segment-pair": "SEGMENT-PAIR+NSP",
    "sentence-pair": "SENTENCE-PAIR+NSP",
    "full-sentences": "FULL-SENTENCES",
    "doc-sentences": "DOC-SENTENCES",
}
PAPER = {
    "source": "Liu et al. 2019, RoBERTa, Table 2 (BERT-base size, 1M steps x 256 sequences)",
    "metrics": ["SQuAD 1.1 F1", "SQuAD 2.0 F1", "MNLI-m", "SST-2", "RACE"],
    "segment-pair": [90.4, 78.7, 84.0, 92.9, 64.2],
    "sentence-pair": [88.7, 76.2, 82.9, 92.1, 63.0],
    "full-sentences": [90.4, 79.1, 84.7, 92.5, 64.8],
    "doc-sentences": [90.6, 79.7, 84.7, 92.7, 65.6],
    "conclusion": "single sentences hurt; removing NSP matches or slightly improves; "
    "not crossing documents is slightly better than crossing them",
}


def figure(payload: dict) -> object:
    steps, seeds = payload["config"]["training"]["steps"], len(payload["config"]["seeds"])
    return common.plot_arms(
        payload["runs"],
        ARMS,
        f"Input formats ({steps} steps, ~equal tokens, {seeds} seeds)",
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
    steps = args.steps or (6 if fast else 600)
    max_length = 128
    base_batch = 16  # for the full-length formats; sentence-pair gets more, shorter examples
    model = common.TinyModel()
    lr = 3e-3  # 1e-3 left these tiny models on the unigram plateau for 300+ steps

    start = time.perf_counter()
    data = common.build_data(
        max_length, max_documents=40 if fast else None, max_eval_examples=32 if fast else 256
    )
    # Pairs longer than max_length lose A's beginning and B's end, never the A|B junction that
    # NSP is judged on (the library's default; BERT cut random ends, truncation="random").
    cut = "junction"
    train = {
        f: make_format_examples(
            data.corpus.train, data.tokenizer, max_length, format=f, seed=0, truncation=cut
        )
        for f in ARMS
    }
    held_out_pairs = {
        f: make_format_examples(
            data.corpus.validation, data.tokenizer, max_length, format=f, seed=1, truncation=cut
        )
        for f in NSP_FORMATS
    }
    reference_length = common.mean_length(train["full-sentences"])
    batch = {
        f: max(1, round(base_batch * reference_length / common.mean_length(train[f]))) for f in ARMS
    }
    collate = PretrainingCollator(data.tokenizer)
    config = model.config(data.tokenizer, max_length)

    runs = [
        common.Run(
            arm=f,
            seed=seed,
            train=list(train[f]),
            collate=collate,
            model_config=config,
            steps=steps,
            batch_size=batch[f],
            lr=lr,
            nsp=f in NSP_FORMATS,
            eval_every=max(1, steps // 10),
            extra_eval={"own_format": list(held_out_pairs[f])} if f in NSP_FORMATS else {},
        )
        for seed in range(seeds)
        for f in ARMS
    ]
    results = common.run_all(runs, data, workers)
    metrics = (
        "eval_mlm_loss",
        "eval_mlm_accuracy",
        "own_format_nsp_accuracy",
        "own_format_mlm_loss",
        "train_tokens",
    )
    summary = common.summarize(results, ARMS, metrics)
    comparisons = [
        common.paired_comparison(results, a, b, m)
        for a, b in (
            ("segment-pair", "sentence-pair"),
            ("segment-pair", "full-sentences"),
            ("segment-pair", "doc-sentences"),
            ("full-sentences", "doc-sentences"),
        )
        for m in ("eval_mlm_loss", "eval_mlm_accuracy")
    ]
    payload = {
        "experiment": NAME,
        "question": "Which input format trains the better masked LM, and does NSP help?",
        "mode": "fast" if fast else "full",
        "command": common.command_line(__file__, sys.argv[1:] if argv is None else argv),
        **common.environment(),
        "config": {
            "model": {
                "class": "RobertaForMaskedLM (+ NSP head for the pair formats)",
                **model.__dict__,
            },
            "training": {
                "steps": steps,
                "batch_size_per_format": batch,
                "lr": lr,
                "schedule": "linear, 6% warmup",
                "optimizer": "AdamW (0.9, 0.98)",
                "precision": "fp32",
            },
            "data": {
                **data.info,
                "examples_per_format": {f: len(train[f]) for f in ARMS},
                "mean_tokens_per_example": {
                    f: round(common.mean_length(train[f]), 1) for f in ARMS
                },
                "held_out_pairs": {f: len(held_out_pairs[f]) for f in NSP_FORMATS},
                "pair_truncation": cut,
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
