"""Mechanism labs: for each design choice a chapter teaches, a small task constructed so that the
mechanism is necessary (or useless) by design, where its effect is large, fast and unmistakable.

    from course_lib.labs import run_lab, describe
    result = run_lab("c2p_needed", seeds=2, preset="live")
    print(describe(result))

`experiments/labs/run.py` runs a lab for N seeds and writes experiments/labs/results/<lab>.json;
each chapter's labs notebook runs a reduced version live and reads the committed results.
"""

from course_lib.config import tiny_config
from course_lib.labs import (  # noqa: F401  (importing a chapter module registers its labs)
    albert,
    albert_sharing,
    bert,
    deberta,
    deberta_positions,
    distil,
    roberta,
)
from course_lib.labs.core import (
    CHAPTERS,
    DESIGN_SEED_LIMIT,
    FRESH_SEEDS,
    GUARD_SEEDS,
    LABS,
    PRESETS,
    Lab,
    choose,
    describe,
    design_part,
    fit,
    get_lab,
    lab,
    labs_of,
    load_result,
    plot_lab,
    register,
    run_lab,
    save_result,
    seed_everything,
    summarize,
)

__all__ = [
    "CHAPTERS",
    "DESIGN_SEED_LIMIT",
    "FRESH_SEEDS",
    "GUARD_SEEDS",
    "LABS",
    "PRESETS",
    "Lab",
    "choose",
    "describe",
    "design_part",
    "fit",
    "get_lab",
    "lab",
    "labs_of",
    "load_result",
    "plot_lab",
    "register",
    "run_lab",
    "save_result",
    "seed_everything",
    "summarize",
    "tiny_config",
]
