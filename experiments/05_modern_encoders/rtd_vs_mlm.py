"""Replaced-token detection vs masked-LM at equal compute: ELECTRA's headline in miniature.

Clark et al. (2020) pretrain the same encoder two ways and fine-tune both on GLUE: ELECTRA's
replaced-token detection (RTD: a small generator fills 15% masked positions, the encoder learns
to tell replaced tokens from originals at *every* position) beats BERT's masked-LM at equal
compute, by the most for small models (Table 1: ELECTRA-Small 79.9 vs BERT-Small 75.1 GLUE).

Here: one tiny encoder (2 layers x 64, pre-LN, 32-token sequences, WordPiece 4,000), from the
same initial weights, pretrained

  mlm  as BERT (BertForMaskedLM, 15% selected, 80/10/10);
  rtd  as the discriminator of an ElectraPretrainer (course_lib.objectives.rtd): generator of
       half the width, shared embeddings, loss L_mlm + 50 L_disc;

at equal training FLOPs: the RTD arm runs `rtd_steps`, the MLM arm as many steps as cost the
same number of matmul FLOPs (counted from the configs, `train_flops`; the generator makes an RTD
step dearer), as the paper compares at equal FLOPs. The seconds each arm really took are
recorded too (on a CPU, small ops cost more than their FLOPs). Then both encoders, and a
random-init one, are fine-tuned on an offline task of the course (course_lib.data.tasks):
word-class tagging from 100 labelled sentences (where chapter 01 found pretraining helps), with
the same head initialisation, data order and steps. Per seed the arms are paired, and the
RTD - MLM difference is judged by the course's rule (course_lib.stats.compare).

    python experiments/05_modern_encoders/rtd_vs_mlm.py            # the committed results
    python experiments/05_modern_encoders/rtd_vs_mlm.py --fast --out /tmp/x   # seconds
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from course_lib.config import BertConfig
from course_lib.config.electra import ElectraConfig, generator_config
from course_lib.data import PretrainingCollator, build_pretraining_dataset, load_builtin_corpus
from course_lib.data.tasks import build_task
from course_lib.models.bert import BertForMaskedLM
from course_lib.models.electra import ElectraForMaskedLM, ElectraForPreTraining
from course_lib.objectives.masking import MaskingConfig
from course_lib.objectives.rtd import ELECTRA_MASKING, ElectraPretrainer, RTDObjective
from course_lib.stats import RULE, compare, mean_std
from course_lib.tokenization import train_tokenizer
from course_lib.training import Trainer, TrainingConfig
from course_lib.training.finetune import finetune, task_model

NAME = "rtd_vs_mlm"
RESULTS = Path(__file__).resolve().parent / "results"
ARMS = ("rtd", "mlm", "random")
PAPER = {
    "source": "Clark et al. 2020, ELECTRA, Table 1 (GLUE dev, equal pretraining compute)",
    "small": {"ELECTRA-Small": 79.9, "BERT-Small": 75.1},
    "base": {"ELECTRA-Base": 85.1, "BERT-Base": 82.2},
}
FULL = dict(
    seeds=[0, 1, 2, 3, 4],
    rtd_steps=650,
    batch_size=32,
    lr=2e-3,
    vocab_size=4000,
    max_length=32,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=256,
    initializer_range=0.05,
    generator_multiplier=0.5,
    max_documents=None,
    # word_order (shuffled or not, 500 sentences) was dropped after a one-seed pilot at 300 RTD
    # steps: every arm at chance (0.49-0.50); its 7 s per fine-tuning went to pretraining.
    tasks={"word_class": dict(train_size=100, test_size=500, steps=150)},
    finetune_lr=1e-3,
)
FAST = dict(
    FULL,
    seeds=[0, 1],
    rtd_steps=12,
    vocab_size=600,
    max_documents=40,
    tasks={"word_class": dict(train_size=40, test_size=60, steps=6)},
)


# ----- configs and compute -------------------------------------------------------------------


def configs(settings: dict[str, Any], vocab_size: int, pad_token_id: int):
    """(BERT config, ELECTRA discriminator config, generator config) of one encoder size.
    E = H, so the discriminator's encoder has exactly BERT's parameters and weight names."""
    sizes = dict(
        vocab_size=vocab_size,
        pad_token_id=pad_token_id,
        hidden_size=settings["hidden_size"],
        num_hidden_layers=settings["num_hidden_layers"],
        num_attention_heads=settings["num_attention_heads"],
        intermediate_size=settings["intermediate_size"],
        max_position_embeddings=settings["max_length"],
        initializer_range=settings["initializer_range"],
        pre_layer_norm=True,  # the course's CPU recipe (recipes.TINY): stable at lr 2e-3
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    bert = BertConfig(**sizes)
    disc = ElectraConfig(**sizes, embedding_size=settings["hidden_size"])
    return bert, disc, generator_config(disc, settings["generator_multiplier"])


def forward_flops_per_token(config: Any, seq: int) -> int:
    """Matmul FLOPs (2 per multiply-add) of the encoder body for one token: per layer the four
    H x H projections, the FFN and the two attention products over `seq` positions."""
    h, inter = config.hidden_size, config.intermediate_size
    e = getattr(config, "embedding_size", h)
    per_layer = 2 * (4 * h * h + 2 * h * inter) + 2 * 2 * seq * h
    return config.num_hidden_layers * per_layer + (2 * e * h if e != h else 0)


def train_flops(
    arm: str,
    bert: BertConfig,
    disc: ElectraConfig,
    gen: ElectraConfig,
    seq: int,
    tokens: float,
    masked: float,
) -> float:
    """Training FLOPs of one step (3x the forward: forward + backward) with `tokens` tokens of
    which `masked` are MLM targets. MLM: encoder on every token, vocabulary head on the masked.
    RTD: generator encoder + its head (in E dims) on the masked, discriminator + its head
    (H -> H -> 1) on every token."""
    v = bert.vocab_size
    if arm == "mlm":
        h = bert.hidden_size
        forward = tokens * forward_flops_per_token(bert, seq) + masked * 2 * (h * h + h * v)
    else:
        hg, eg, hd = gen.hidden_size, gen.embedding_size, disc.hidden_size
        forward = (
            tokens * forward_flops_per_token(gen, seq)
            + masked * 2 * (hg * eg + eg * v)
            + tokens * (forward_flops_per_token(disc, seq) + 2 * (hd * hd + hd))
        )
    return 3.0 * forward


# ----- pretraining ---------------------------------------------------------------------------


def build_arm(arm: str, bert: BertConfig, disc: ElectraConfig, gen: ElectraConfig, seed: int):
    """The model to pretrain. Both arms start from the same encoder weights: the BERT model is
    built from the seed and the discriminator's encoder is a copy of its encoder."""
    torch.manual_seed(seed)
    mlm = BertForMaskedLM(bert)
    if arm == "mlm":
        return mlm
    discriminator = ElectraForPreTraining(disc)
    discriminator.backbone.load_state_dict(mlm.backbone.state_dict())
    torch.manual_seed(seed + 1000)
    return ElectraPretrainer(ElectraForMaskedLM(gen), discriminator)


def pretrain(arm: str, model, train, tokenizer, steps: int, settings, seed: int):
    masking = ELECTRA_MASKING if arm == "rtd" else MaskingConfig()
    config = TrainingConfig(
        max_steps=steps,
        batch_size=settings["batch_size"],
        lr=settings["lr"],
        warmup=0.06,
        seed=seed,
        log_every=max(1, steps // 10),
        precision="fp32",
        device="auto",  # the engine's choice: a GPU where there is one, else the CPU
        progress=False,
    )
    objective = RTDObjective() if arm == "rtd" else None
    trainer = Trainer(
        model,
        train,
        PretrainingCollator(tokenizer, masking, seed=seed),
        config,
        objective=objective,
    )
    start = time.perf_counter()
    history = trainer.train()
    seconds = time.perf_counter() - start
    keep = (
        "step",
        "train_loss",
        "train_mlm_loss",
        "train_disc_loss",
        "train_disc_accuracy",
        "train_replaced",
    )
    curve = [{k: r[k] for k in keep if k in r} for r in history if "train_loss" in r]
    return seconds, curve


def encoder_state(arm: str, model) -> dict[str, torch.Tensor]:
    """The pretrained encoder (embeddings + layers) as a BertModel state dict."""
    backbone = model.discriminator.backbone if arm == "rtd" else model.backbone
    return {k: v.detach().clone() for k, v in backbone.state_dict().items()}


# ----- fine-tuning ---------------------------------------------------------------------------


def finetune_one(task, bert: BertConfig, state, seed: int, steps: int, lr: float):
    """Fine-tune a BERT task model whose encoder is `state` (None: random init); the head init,
    data order and dropout depend on the seed only, so the arms of one seed are paired."""
    model = task_model(
        task.kind,
        bert,
        num_labels=task.num_labels,
        seed=seed,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )
    if state is not None:
        missing, unexpected = model.backbone.load_state_dict(state, strict=False)
        # only the pooler (classification) is new; it is untrained in every arm
        assert not unexpected and all(k.startswith("pooler.") for k in missing), (
            missing,
            unexpected,
        )
    config = TrainingConfig(
        max_steps=steps,
        batch_size=32,
        lr=lr,
        warmup=0.1,
        seed=seed,
        log_every=max(1, steps // 5),
        precision="fp32",
        device="auto",  # the engine's choice: a GPU where there is one, else the CPU
        progress=False,
    )
    return finetune(model, task, config).metrics["eval_accuracy"]


# ----- the experiment ------------------------------------------------------------------------


def run(settings: dict[str, Any], log=print) -> dict[str, Any]:
    corpus = load_builtin_corpus(progress=False)
    if settings["max_documents"]:
        n = settings["max_documents"]
        corpus = replace(corpus, train=corpus.train[:n], validation=corpus.validation[: n // 2])
    tokenizer = train_tokenizer("bert", corpus.texts("train"), vocab_size=settings["vocab_size"])
    train = build_pretraining_dataset(corpus.train, tokenizer, "mlm", settings["max_length"], 0)
    bert, disc, gen = configs(settings, tokenizer.vocab_size, tokenizer.pad_token_id)
    tasks = {
        name: build_task(
            name,
            corpus,
            tokenizer,
            train_size=t["train_size"],
            test_size=t["test_size"],
            max_length=settings["max_length"],
        )
        for name, t in settings["tasks"].items()
    }
    # equal compute: count the FLOPs of an average batch (its real and masked tokens)
    tokens = settings["batch_size"] * sum(len(e["input_ids"]) for e in train) / len(train)
    masked = 0.15 * tokens
    cost = {
        arm: train_flops(arm, bert, disc, gen, settings["max_length"], tokens, masked)
        for arm in ("rtd", "mlm")
    }
    steps = {"rtd": settings["rtd_steps"]}
    steps["mlm"] = round(settings["rtd_steps"] * cost["rtd"] / cost["mlm"])
    log(
        f"{len(train):,} training blocks; steps rtd {steps['rtd']}, mlm {steps['mlm']} "
        f"(equal FLOPs: an RTD step costs {cost['rtd'] / cost['mlm']:.2f} MLM steps)"
    )
    runs = []
    for seed in settings["seeds"]:
        for arm in ARMS:
            row: dict[str, Any] = {"seed": seed, "arm": arm}
            state = None
            if arm != "random":
                model = build_arm(arm, bert, disc, gen, seed)
                row["pretrain_seconds"], row["curve"] = pretrain(
                    arm, model, train, tokenizer, steps[arm], settings, seed
                )
                row["steps"] = steps[arm]
                row["flops"] = cost[arm] * steps[arm]
                state = encoder_state(arm, model)
            for name, task in tasks.items():
                start = time.perf_counter()
                row[name] = finetune_one(
                    task,
                    bert,
                    state,
                    seed,
                    settings["tasks"][name]["steps"],
                    settings["finetune_lr"],
                )
                row[f"{name}_seconds"] = time.perf_counter() - start
            log(
                f"seed {seed} {arm:6s} "
                + "  ".join(f"{n} {row[n]:.3f}" for n in tasks)
                + (f"  ({row['pretrain_seconds']:.0f}s pretraining)" if arm != "random" else "")
            )
            runs.append(row)
    return {
        "steps": steps,
        "flops_per_step": cost,
        "baselines": {name: task.majority_baseline() for name, task in tasks.items()},
        "tasks": {
            name: {"train": len(t.train), "test": len(t.test), "description": t.description}
            for name, t in tasks.items()
        },
        "parameters": {
            "encoder": sum(p.numel() for p in BertForMaskedLM(bert).backbone.parameters()),
            "generator_hidden": gen.hidden_size,
        },
        "corpus": corpus.summary(),
        "runs": runs,
        "summary": summarize(runs, list(tasks)),
    }


def summarize(runs: list[dict[str, Any]], tasks: list[str]) -> dict[str, Any]:
    """Per task: mean ± std of each arm, and the paired differences rtd - mlm, rtd - random and
    mlm - random with the course's verdict; per arm the mean pretraining seconds."""
    summary: dict[str, Any] = {}
    for name in tasks:
        by_arm = {arm: {r["seed"]: r[name] for r in runs if r["arm"] == arm} for arm in ARMS}
        summary[name] = {
            "arms": {arm: mean_std(list(v.values())) for arm, v in by_arm.items()},
            **{
                f"{a}_minus_{b}": compare(by_arm[a], by_arm[b])
                for a, b in (("rtd", "mlm"), ("rtd", "random"), ("mlm", "random"))
                if len(by_arm[a]) > 1
            },
        }
    summary["pretrain_seconds"] = {
        arm: mean_std([r["pretrain_seconds"] for r in runs if r["arm"] == arm])
        for arm in ("rtd", "mlm")
    }
    return summary


def plot(payload: dict[str, Any], path: Path) -> None:
    """Per task: each seed's accuracy in each arm (lines join a seed), and the paired RTD - MLM
    differences."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(payload["tasks"])
    fig, axes = plt.subplots(2, len(tasks), figsize=(5 * len(tasks), 7), squeeze=False)
    for col, name in enumerate(tasks):
        ax = axes[0, col]
        seeds = sorted({r["seed"] for r in payload["runs"]})
        for seed in seeds:
            ys = [
                next(r[name] for r in payload["runs"] if r["seed"] == seed and r["arm"] == a)
                for a in ARMS
            ]
            ax.plot(range(len(ARMS)), ys, "o-", color="grey", alpha=0.6)
        ax.axhline(payload["baselines"][name], color="black", ls="--", lw=1, label="majority")
        ax.set_xticks(range(len(ARMS)), ARMS)
        ax.set_title(f"{name}: held-out accuracy per seed")
        ax.legend(fontsize=8)
        diff = payload["summary"][name].get("rtd_minus_mlm")
        ax = axes[1, col]
        if diff:
            ax.bar(range(len(diff["per_seed"])), diff["per_seed"], color="#4c72b0")
            ax.axhline(0, color="black", lw=1)
            ax.set_xticks(range(len(seeds)), [f"seed {s}" for s in seeds])
            ax.set_title(
                f"RTD - MLM: {diff['mean']:+.3f} (t = {diff['t'] or float('nan'):.2f}, "
                f"p = {diff['p']:.2g})",
                fontsize=9,
            )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fast", action="store_true", help="a smoke run of seconds, not results")
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--rtd-steps", type=int, default=None, help="RTD steps (MLM: equal FLOPs)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--no-plot", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    settings = json.loads(json.dumps(FAST if args.fast else FULL))
    if args.seeds is not None:
        settings["seeds"] = args.seeds
    if args.rtd_steps is not None:
        settings["rtd_steps"] = args.rtd_steps
    start = time.perf_counter()
    results = run(settings, log=lambda m: print(m, flush=True))
    payload = {
        "experiment": NAME,
        "settings": settings,
        "fast": args.fast,
        **results,
        "noise_rule": RULE,
        "paper": PAPER,
        "command": "python "
        + " ".join(
            shlex.quote(a)
            for a in [
                f"experiments/05_modern_encoders/{NAME}.py",
                *(argv if argv is not None else sys.argv[1:]),
            ]
        ),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg()[0],
        "seconds": round(time.perf_counter() - start, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{NAME}.json").write_text(json.dumps(payload, indent=1) + "\n")
    if not args.no_plot:
        plot(payload, args.out / f"{NAME}.png")
    for name in payload["tasks"]:
        s = payload["summary"][name]
        arms = "  ".join(f"{a} {v['mean']:.3f} ± {v['std']:.3f}" for a, v in s["arms"].items())
        print(f"{name}: {arms}")
        for key in ("rtd_minus_mlm", "rtd_minus_random", "mlm_minus_random"):
            if key in s:
                print(f"  {key}: {s[key]['verdict']}")
    print(f"wrote {NAME}.json in {payload['seconds']:.0f}s")
    return payload


if __name__ == "__main__":
    main()
