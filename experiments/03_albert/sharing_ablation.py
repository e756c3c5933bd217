"""Mini version of the ALBERT paper's Tables 3 and 4: embedding size E and what is shared,
against held-out MLM loss, at equal optimizer steps.

Every configuration is a tiny ALBERT (H=64, 4 layers applied, pre-LN) trained with MLM only on
contiguous blocks of the built-in corpus, with the same steps, batches, masks and learning rate;
only E and the sharing strategy change. Several seeds per configuration, so a difference can be
compared with the seed-to-seed noise. Also records, for the all-shared and not-shared models at
the middle E, the per-layer L2 distance and cosine similarity between each layer's input and
output (the paper's Figure 1) after training.

    python experiments/03_albert/sharing_ablation.py            # full: the committed results
    python experiments/03_albert/sharing_ablation.py --fast     # seconds, for smoke tests
    python experiments/03_albert/sharing_ablation.py --out /tmp/x --steps 100 --seeds 0 1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from course_lib.counting import count_parameters  # noqa: E402
from course_lib.data import PretrainingCollator  # noqa: E402
from course_lib.models.albert import AlbertForMaskedLM  # noqa: E402

NAME = "sharing_ablation"
# (label, sharing, E): Table 3's E sweep for all-shared and not-shared, and Table 4's four
# strategies at the middle E. H = 64, so E = 64 means no projection (as E = 768 in the paper).
CONFIGS = [
    ("all, E=16", "all", 16),
    ("all, E=32", "all", 32),
    ("all, E=64", "all", 64),
    ("attention, E=32", "attention", 32),
    ("ffn, E=32", "ffn", 32),
    ("none, E=16", "none", 16),
    ("none, E=32", "none", 32),
    ("none, E=64", "none", 64),
]
DEPTH_CONFIGS = ("all, E=32", "none, E=32")
# The paper's numbers for the rows we mirror (ALBERT-base, Tables 3 and 4): parameters and the
# average over SQuAD1.1/2.0, MNLI, SST-2 and RACE after full pretraining.
PAPER = {
    "table3": {
        "not-shared": {"64": [87, 81.3], "128": [89, 81.7], "256": [93, 81.8], "768": [108, 82.3]},
        "all-shared": {"64": [10, 79.0], "128": [12, 80.1], "256": [16, 79.6], "768": [31, 79.8]},
        "columns": ["parameters (M)", "average score"],
    },
    "table4": {
        "E=768": {
            "all": [31, 79.8],
            "attention": [83, 81.6],
            "ffn": [57, 79.5],
            "none": [108, 82.3],
        },
        # shared-FFN at E=128: its average is left out (null): we could not verify the figure.
        "E=128": {
            "all": [12, 80.1],
            "attention": [64, 81.7],
            "ffn": [38, None],
            "none": [89, 81.6],
        },
        "columns": ["parameters (M)", "average score"],
    },
}

FULL = dict(
    steps=150,
    seeds=[0, 1, 2],
    max_length=32,
    batch_size=16,
    vocab_size=4000,
    hidden_size=64,
    num_hidden_layers=4,
    lr=2e-3,
    max_documents=None,
    eval_examples=512,
)
FAST = dict(
    steps=4,
    seeds=[0, 1],
    max_length=32,
    batch_size=8,
    vocab_size=600,
    hidden_size=32,
    num_hidden_layers=2,
    lr=2e-3,
    max_documents=40,
    eval_examples=32,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fast", action="store_true", help="tiny smoke run (seconds)")
    p.add_argument("--out", type=Path, default=common.RESULTS, help="folder for JSON + PNG")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps per run")
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set hidden_size=128 lr=0.001 (JSON values)",
    )
    p.add_argument("--no-plot", action="store_true")
    p.add_argument(
        "--restat",
        action="store_true",
        help="only recompute the summary of the JSON in --out from its runs",
    )
    return p.parse_args(argv)


def run(settings: dict[str, Any], progress: bool = True) -> dict[str, Any]:
    """Train every configuration for every seed; return per-seed numbers and summaries."""
    data = common.build_data(
        settings["max_length"], settings["vocab_size"], max_documents=settings["max_documents"]
    )
    train = data.blocks("train")
    held_out = data.blocks("validation")[: settings["eval_examples"]]
    collator = PretrainingCollator(data.tokenizer)
    # Figure 1's measurement runs on unmasked held-out text.
    depth_batch = PretrainingCollator(data.tokenizer, masking=None)(held_out[:16])
    runs: list[dict[str, Any]] = []
    for seed in settings["seeds"]:
        for label, sharing, e in CONFIGS:
            config = common.tiny_config(
                data.tokenizer.vocab_size,
                settings["hidden_size"],
                settings["num_hidden_layers"],
                embedding_size=e,
                sharing=sharing,
                max_length=settings["max_length"],
                pad_token_id=data.tokenizer.pad_token_id,
            )
            common.seed_everything(seed)
            model = AlbertForMaskedLM(config)
            start = time.perf_counter()
            trainer, history = common.pretrain(
                model,
                train,
                collator,
                "mlm",
                settings["steps"],
                seed,
                settings["lr"],
                settings["batch_size"],
            )
            evaluation = trainer.evaluate(held_out)
            seconds = time.perf_counter() - start
            row = {
                "config": label,
                "sharing": sharing,
                "embedding_size": e,
                "seed": seed,
                "parameters": count_parameters(config, "AlbertForMaskedLM")["total"],
                "encoder_and_embeddings": count_parameters(config, "AlbertModel")["total"]
                - count_parameters(config, "AlbertModel")["pooler"],
                "eval_mlm_loss": evaluation["eval_mlm_loss"],
                "eval_mlm_accuracy": evaluation["eval_mlm_accuracy"],
                "final_train_loss": history[-1]["train_loss"],
                "seconds": round(seconds, 1),
            }
            if label in DEPTH_CONFIGS:
                row["depth"] = common.depth_dynamics(model, depth_batch)
            runs.append(row)
            if progress:
                common.log(
                    f"seed {seed} {label:16s} params {row['parameters']:>8,} "
                    f"eval MLM loss {row['eval_mlm_loss']:.3f} ({seconds:.0f}s)"
                )
    depth = {label: [r["depth"] for r in runs if r["config"] == label] for label in DEPTH_CONFIGS}
    info = {
        **data.info,
        "train_blocks": len(train),
        "held_out_blocks": len(held_out),
        "unigram_loss": common.unigram_loss(train, held_out, data.tokenizer),
    }
    return {"data": info, "runs": runs, "summary": summarize({"runs": runs}), "depth": depth}


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """Per configuration: parameters, held-out MLM loss and accuracy (mean ± std over seeds),
    and the loss minus all-shared E=32's, paired by seed (same seed = same data order and
    masks, so seed noise common to both cancels), judged by the course's rule."""
    runs = results["runs"]
    summary = {}
    reference = {r["seed"]: r["eval_mlm_loss"] for r in runs if r["config"] == "all, E=32"}
    for label, sharing, e in CONFIGS:
        rows = [r for r in runs if r["config"] == label]
        if not rows:
            continue
        summary[label] = {
            "sharing": sharing,
            "embedding_size": e,
            "parameters": rows[0]["parameters"],
            "eval_mlm_loss": common.mean_std([r["eval_mlm_loss"] for r in rows]),
            "eval_mlm_accuracy": common.mean_std([r["eval_mlm_accuracy"] for r in rows]),
            "loss_minus_all_E32": common.paired(
                {r["seed"]: r["eval_mlm_loss"] for r in rows}, reference
            ),
        }
    return summary


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    colours = {"all": "#4c72b0", "attention": "#dd8452", "ffn": "#55a868", "none": "#c44e52"}
    for label, s in results["summary"].items():
        loss = s["eval_mlm_loss"]
        ax.errorbar(
            s["parameters"] / 1e3,
            loss["mean"],
            yerr=loss["std"],
            fmt="o",
            color=colours[s["sharing"]],
            capsize=3,
        )
        ax.annotate(
            label,
            (s["parameters"] / 1e3, loss["mean"]),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=8,
        )
    for sharing, colour in colours.items():
        ax.plot([], [], "o", color=colour, label=f"sharing={sharing}")
    ax.axhline(
        results["data"]["unigram_loss"],
        color="grey",
        ls=":",
        label="unigram (token frequencies only)",
    )
    settings = results["settings"]
    ax.set(
        xlabel="parameters (thousands, AlbertForMaskedLM)",
        ylabel="held-out MLM loss",
        title=f"E and sharing at equal steps ({settings['steps']} steps, "
        f"mean ± std over {len(settings['seeds'])} seeds)",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.restat:
        return common.restat(NAME, summarize, args.out, None if args.no_plot else plot)
    common.set_threads(args.threads)
    settings = dict(FAST if args.fast else FULL)
    if args.steps is not None:
        settings["steps"] = args.steps
    if args.seeds is not None:
        settings["seeds"] = args.seeds
    settings.update(common.parse_overrides(args.set, settings))
    return common.run_and_write(NAME, run, settings, args, argv, PAPER, plot)


if __name__ == "__main__":
    main()
