"""Mini version of the ALBERT paper's Tables 3 and 4: embedding size E and what is shared,
against held-out MLM loss, at equal optimizer steps.

Every configuration is a tiny ALBERT (H=64, 4 layers applied, pre-LN) trained with MLM only on
contiguous blocks of the built-in corpus, with the same steps, batches, masks and learning rate;
only E and the sharing strategy change. Several seeds per configuration, so a difference can be
compared with the seed-to-seed noise. Also records, for the all-shared and not-shared models at
the middle E, the per-layer L2 distance and cosine similarity between each layer's input and
output (the paper's Figure 1) after training, for these pre-LN models and for two extra post-LN
arms (all-shared and not-shared, E=32; ALBERT itself is post-LN).

    python experiments/03_albert/sharing_ablation.py            # full: 2,000 steps at init 0.08
    python experiments/03_albert/sharing_ablation.py --fast     # seconds, for smoke tests
    python experiments/03_albert/sharing_ablation.py --out /tmp/x --steps 100 --seeds 0 1
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import Any

import torch

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
# Post-LN twins of the two depth configurations: trained identically (same seed, data, masks),
# only the LayerNorm placement differs. They exist for the depth measurement (the paper's
# models are post-LN); their MLM losses are reported too, paired against the pre-LN twin.
POST_LN_CONFIGS = [
    ("all, E=32, post-LN", "all", 32),
    ("none, E=32, post-LN", "none", 32),
]
PRE_LN_TWIN = {"all, E=32, post-LN": "all, E=32", "none, E=32, post-LN": "none, E=32"}
DEPTH_CONFIGS = ("all, E=32", "none, E=32", "all, E=32, post-LN", "none, E=32, post-LN")
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

# initializer_range 0.08, not BERT's 0.02: at width 64 a 0.02 init makes the query-key products
# so small that attention stays near-uniform for hundreds to thousands of steps (the course's
# tiny recipe uses 0.05 ~ 0.6/sqrt(128) at width 128; 0.6/sqrt(64) = 0.075, and sop_vs_nsp.py
# uses 0.08 at this width). The first version of this ablation (150 steps at 0.02) never left
# the unigram phase.
FULL = dict(
    steps=2000,
    seeds=[0, 1, 2],
    max_length=32,
    batch_size=16,
    vocab_size=4000,
    hidden_size=64,
    num_hidden_layers=4,
    lr=2e-3,
    max_documents=None,
    eval_examples=512,
    initializer_range=0.08,
    post_ln=True,
    # the trained all-shared layers are also applied 12 times (3x their trained depth)
    iterate_layers=12,
    # E=16 left out of the committed run to fit 2,000 steps x 3 seeds into an hour of one CPU
    # thread (the 150-step run had it 0.13 nats worse than E=32); `--set configs=null` runs all.
    configs=[label for label, _, _ in CONFIGS if not label.endswith("E=16")],
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
    initializer_range=0.08,
    post_ln=True,
    iterate_layers=4,
    configs=None,
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
        "--partial",
        type=Path,
        default=None,
        help="also write the finished runs to this JSON after each run",
    )
    p.add_argument(
        "--restat",
        action="store_true",
        help="only recompute the summary of the JSON in --out from its runs",
    )
    return p.parse_args(argv)


@torch.no_grad()
def iterate_shared_layer(
    model: torch.nn.Module, batch: dict[str, torch.Tensor], applications: int
) -> dict[str, list[float]]:
    """An all-shared model's one layer applied `applications` times (more than it was trained
    with), measured as `common.depth_dynamics` measures the trained depth: is the repeated map
    heading for a fixed point (L2 -> 0, cosine -> 1, as Deep Equilibrium Models reach) or not?
    The first num_hidden_layers values equal the trained depth's."""
    backbone = getattr(model, "backbone", model)
    was_training = backbone.training
    backbone.eval()
    device = next(backbone.parameters()).device
    input_ids = batch["input_ids"].to(device)
    token_type_ids = batch.get("token_type_ids")
    x = backbone.embeddings(
        input_ids, None if token_type_ids is None else token_type_ids.to(device)
    )
    real = batch["attention_mask"].bool().to(device)
    keep = real[:, None, None, :]
    layer = backbone.encoder.layer_at(0)
    width = x.shape[-1] ** 0.5
    l2, cosine = [], []
    for _ in range(applications):
        before = x
        x, _ = layer(x, keep)
        a, b = before[real], x[real]
        l2.append(float((b - a).norm(dim=-1).mean() / width))
        cosine.append(float(torch.nn.functional.cosine_similarity(a, b, dim=-1).mean()))
    backbone.train(was_training)
    return {"l2": l2, "cosine": cosine}


def collect(runs: list[dict[str, Any]], info: dict[str, Any]) -> dict[str, Any]:
    """The result sections built from the per-seed runs: data, runs, summary, depth curves."""

    def curves(key: str) -> dict[str, list[dict[str, list[float]]]]:
        return {
            label: [r[key] for r in runs if r["config"] == label]
            for label in DEPTH_CONFIGS
            if any(r["config"] == label and key in r for r in runs)
        }

    return {
        "data": info,
        "runs": runs,
        "summary": summarize({"runs": runs}),
        "depth": curves("depth"),
        "depth_iterated": curves("depth_iterated"),
    }


def run(
    settings: dict[str, Any], progress: bool = True, partial: Path | None = None
) -> dict[str, Any]:
    """Train every configuration for every seed; return per-seed numbers and summaries.
    With `partial`, the runs so far are also written there after each run (a long run that
    has to stop early keeps its finished runs)."""
    data = common.build_data(
        settings["max_length"], settings["vocab_size"], max_documents=settings["max_documents"]
    )
    train = data.blocks("train")
    held_out = data.blocks("validation")[: settings["eval_examples"]]
    collator = PretrainingCollator(data.tokenizer)
    # Figure 1's measurement runs on unmasked held-out text.
    depth_batch = PretrainingCollator(data.tokenizer, masking=None)(held_out[:16])
    info = {
        **data.info,
        "train_blocks": len(train),
        "held_out_blocks": len(held_out),
        "unigram_loss": common.unigram_loss(train, held_out, data.tokenizer),
    }
    runs: list[dict[str, Any]] = []
    chosen = settings.get("configs")  # None: every configuration
    arms = [(label, sharing, e, True) for label, sharing, e in CONFIGS]
    if settings.get("post_ln", False):
        arms += [(label, sharing, e, False) for label, sharing, e in POST_LN_CONFIGS]
    arms = [arm for arm in arms if chosen is None or arm[0] in chosen or not arm[3]]
    # The depth arms first (every seed), then the rest: a run cut short keeps whole arms.
    # Each run is seeded on its own, so the order changes no number.
    phases = [
        [arm for arm in arms if arm[0] in DEPTH_CONFIGS],
        [arm for arm in arms if arm[0] not in DEPTH_CONFIGS],
    ]
    for seed, (label, sharing, e, pre_ln) in (
        (seed, arm) for phase in phases for seed in settings["seeds"] for arm in phase
    ):
        config = common.tiny_config(
            data.tokenizer.vocab_size,
            settings["hidden_size"],
            settings["num_hidden_layers"],
            embedding_size=e,
            sharing=sharing,
            max_length=settings["max_length"],
            pad_token_id=data.tokenizer.pad_token_id,
            initializer_range=settings.get("initializer_range", 0.02),
        )
        if not pre_ln:
            config = config.replace(pre_layer_norm=False)
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
            "pre_layer_norm": pre_ln,
            "seed": seed,
            "parameters": count_parameters(config, "AlbertForMaskedLM")["total"],
            "encoder_and_embeddings": count_parameters(config, "AlbertModel")["total"]
            - count_parameters(config, "AlbertModel")["pooler"],
            "eval_mlm_loss": evaluation["eval_mlm_loss"],
            "eval_mlm_accuracy": evaluation["eval_mlm_accuracy"],
            "final_train_loss": history[-1]["train_loss"],
            "train_curve": [
                [h["step"], round(h["train_loss"], 4)] for h in history if "train_loss" in h
            ],
            "seconds": round(seconds, 1),
        }
        if label in DEPTH_CONFIGS:
            row["depth"] = common.depth_dynamics(model, depth_batch)
            if sharing == "all" and settings.get("iterate_layers"):
                row["depth_iterated"] = iterate_shared_layer(
                    model, depth_batch, settings["iterate_layers"]
                )
        runs.append(row)
        if progress:
            common.log(
                f"seed {seed} {label:16s} params {row['parameters']:>8,} "
                f"eval MLM loss {row['eval_mlm_loss']:.3f} ({seconds:.0f}s)"
            )
        if partial is not None:
            common.write_json(partial, {"settings": settings, **collect(runs, info)})
    return collect(runs, info)


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """Per configuration: parameters, held-out MLM loss and accuracy (mean ± std over seeds),
    and the loss minus all-shared E=32's, paired by seed (same seed = same data order and
    masks, so seed noise common to both cancels), judged by the course's rule. Post-LN arms
    also get `loss_minus_pre_ln`: paired against their pre-LN twin."""
    runs = results["runs"]
    summary = {}

    def losses(label: str) -> dict[int, float]:
        return {r["seed"]: r["eval_mlm_loss"] for r in runs if r["config"] == label}

    reference = losses("all, E=32")
    for label, sharing, e in CONFIGS + POST_LN_CONFIGS:
        rows = [r for r in runs if r["config"] == label]
        if not rows:
            continue
        summary[label] = {
            "sharing": sharing,
            "embedding_size": e,
            "pre_layer_norm": label not in PRE_LN_TWIN,
            "parameters": rows[0]["parameters"],
            "eval_mlm_loss": common.mean_std([r["eval_mlm_loss"] for r in rows]),
            "eval_mlm_accuracy": common.mean_std([r["eval_mlm_accuracy"] for r in rows]),
            "loss_minus_all_E32": common.paired(losses(label), reference),
        }
        if label in PRE_LN_TWIN:
            summary[label]["loss_minus_pre_ln"] = common.paired(
                losses(label), losses(PRE_LN_TWIN[label])
            )
    return summary


def plot(results: dict[str, Any], path: Path) -> None:
    """Left: held-out MLM loss against parameters (mean ± std over seeds). Right, when the
    results have them: the per-layer L2 distance and cosine similarity between each layer's
    input and output (the paper's Figure 1), one panel column for pre-LN and one for post-LN,
    one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"all": "#4c72b0", "attention": "#dd8452", "ffn": "#55a868", "none": "#c44e52"}
    depth = results.get("depth", {})
    post_ln = any(label in PRE_LN_TWIN for label in depth)
    if depth:
        fig = plt.figure(figsize=(15, 6.5), layout="constrained")
        grid = fig.add_gridspec(
            2, 3 if post_ln else 2, width_ratios=[1.6] + [1] * (2 if post_ln else 1)
        )
        ax = fig.add_subplot(grid[:, 0])
    else:
        fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    for label, s in results["summary"].items():
        if not s.get("pre_layer_norm", True):
            continue  # the post-LN arms appear in the depth panels (their loss is in the JSON)
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
    unigram = results["data"]["unigram_loss"]
    if unigram < ax.get_ylim()[1] + 0.5:
        ax.axhline(unigram, color="grey", ls=":", label="unigram (token frequencies only)")
    else:
        ax.plot([], [], " ", label=f"unigram loss {unigram:.2f} (above this frame)")
    settings = results["settings"]
    ax.set(
        xlabel="parameters (thousands, AlbertForMaskedLM)",
        ylabel="held-out MLM loss",
        title=f"E and sharing at equal steps (pre-LN, {settings['steps']} steps,\n"
        f"mean ± std over {len(settings['seeds'])} seeds)",
    )
    ax.legend(fontsize=8, loc="upper right")
    if depth:
        columns = [("pre-LN", [k for k in depth if k not in PRE_LN_TWIN])]
        if post_ln:
            columns.append(("post-LN", [k for k in depth if k in PRE_LN_TWIN]))
        axes = [
            [fig.add_subplot(grid[row, col + 1]) for col in range(len(columns))] for row in (0, 1)
        ]
        for col, (norm, labels) in enumerate(columns):
            for label in labels:
                colour = colours[label.split(",")[0]]
                for i, d in enumerate(depth[label]):
                    layers = range(1, len(d["l2"]) + 1)
                    for row, key in enumerate(("l2", "cosine")):
                        axes[row][col].plot(
                            layers,
                            d[key],
                            marker="o",
                            color=colour,
                            alpha=0.75,
                            label=f"sharing={label.split(',')[0]}" if i == 0 else None,
                        )
            n_layers = settings["num_hidden_layers"]
            axes[0][col].set(title=f"{norm}: L2(input, output) / sqrt(H)")
            axes[1][col].set(title=f"{norm}: cosine(input, output)", xlabel="layer")
            for row in (0, 1):
                axes[row][col].set_xticks(range(1, n_layers + 1))  # whole layers only
                axes[row][col].legend(fontsize=8)
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
    return common.run_and_write(
        NAME, functools.partial(run, partial=args.partial), settings, args, argv, PAPER, plot
    )


if __name__ == "__main__":
    main()
