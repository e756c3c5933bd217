"""Seed statistics for the course's experiments, and the ONE rule for "beyond seed noise".

Every experiment and every mechanism lab runs each arm with a few seeds, pairs the arms seed by
seed (same seed = same data order, masks and, where possible, initial weights) and asks whether
the paired difference is larger than the seed-to-seed noise. The rule, used everywhere in the
course (experiments, labs, notebooks) and named wherever a verdict is printed (`RULE_NAME`):

    With at least 3 seeds, a difference is beyond seed noise when the paired t-test over seeds
    gives a two-sided p < 0.05 AND the difference has the expected sign in every seed but at
    most one. Fewer than 3 seeds: not judged. "In every seed" is said only with at least 5 seeds.

Why this rule and not the labs' former "at least 5 seeds, sign in all but one, |t| >= 3": it is
the one chapter 01 (notebook 06) teaches and every experiment's committed verdict (3 or 5 seeds)
was computed by; the labs' committed 5-seed results pass both (their smallest |t| is 3.7, p =
0.021), so no committed verdict changes. A p-value also adapts its threshold to the number of
seeds (|t| > 2.78 with 5 seeds, > 2.26 with 10), where a fixed |t| >= 3 means a different error
rate at every seed count. Why at least 3 seeds: with 2 the test has one degree of freedom and
"all but at most one" asks nothing of the signs; the 2-seed live runs of the labs notebooks are
reported as "not judged: 2 seeds, the rule needs 3", not as a failure of the mechanism.

Student's t distribution is computed here (regularized incomplete beta function, continued
fraction) so the course needs no scipy.

    >>> result = compare([0.61, 0.64, 0.62], 0.50)  # three seeds against a constant baseline
    >>> round(result["t"], 2), round(result["p"], 4), result["agree"], result["beyond_noise"]
    (13.98, 0.0051, 3, True)
    >>> judge([0.11, 0.14], expected_sign=1)["verdict"].split(" (")[0]
    'not judged: 2 seeds, the rule needs 3: +0.125 ± 0.021'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

ALPHA = 0.05  # two-sided significance level of the paired t-test
MAX_DISAGREEING_SEEDS = 1  # seeds allowed to go the other way
MIN_SEEDS = 3  # fewer seeds than this: "not judged"
MIN_SEEDS_FOR_EVERY_SEED = 5  # fewer seeds than this: never say "in every seed"

RULE = (
    "beyond seed noise = at least 3 seeds, a paired t-test over seeds with two-sided p < 0.05 AND "
    "the expected sign in every seed but at most one; fewer than 3 seeds are not judged; "
    "'in every seed' is said only with at least 5 seeds"
)
RULE_NAME = "course rule: ≥ 3 seeds, paired t-test p < 0.05, sign in all seeds but at most one"


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation (n - 1; 0.0 for one value) and n of per-seed numbers."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_std needs at least one value; got an empty list.")
    n = len(values)
    mean = math.fsum(values) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return {"mean": mean, "std": std, "n": n}


def paired_differences(
    a: Sequence[float] | Mapping[Any, float], b: Sequence[float] | Mapping[Any, float] | float
) -> list[float]:
    """a - b seed by seed. Sequences pair by position, mappings by key (the seed, in the order
    of `a`); a plain number `b` is a constant baseline (e.g. the majority class)."""
    if isinstance(b, (int, float)):
        values = list(a.values()) if isinstance(a, Mapping) else list(a)
        return [float(x) - float(b) for x in values]
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        missing = [k for k in a if k not in b]
        if missing:
            raise ValueError(
                f"paired_differences: seeds {missing} are in a but not in b; "
                "pair only seeds that both arms ran."
            )
        return [float(a[k]) - float(b[k]) for k in a]
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        raise TypeError("paired_differences: give two sequences or two {seed: value} mappings.")
    if len(a) != len(b):
        raise ValueError(
            f"paired_differences: {len(a)} values vs {len(b)}; pair one value per seed in each arm."
        )
    return [float(x) - float(y) for x, y in zip(a, b)]


def _beta_continued_fraction(x: float, a: float, b: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta did not converge for x={x}, a={a}, b={b}")


def regularized_incomplete_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the CDF of the Beta(a, b) distribution at x (0 <= x <= 1, a, b > 0)."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"regularized_incomplete_beta: x must be in [0, 1], got {x}.")
    if a <= 0 or b <= 0:
        raise ValueError(f"regularized_incomplete_beta: a and b must be > 0, got {a}, {b}.")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    # The continued fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry
    # I_x(a, b) = 1 - I_{1-x}(b, a) on the other side.
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(1.0 - x, b, a) / b


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t distribution with `df` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"student_t_cdf: df must be > 0, got {df}.")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * regularized_incomplete_beta(df / (df + t * t), df / 2.0, 0.5)
    return 1.0 - tail if t > 0 else tail


def two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|): the two-sided p-value of a t statistic."""
    if df <= 0:
        raise ValueError(f"two_sided_p: df must be > 0, got {df}.")
    if math.isinf(t):
        return 0.0
    return min(1.0, regularized_incomplete_beta(df / (df + t * t), df / 2.0, 0.5))


def paired_t(differences: Sequence[float]) -> tuple[float, int]:
    """(t, df) of the one-sample t-test of the differences against 0: mean / (std / sqrt(n)).
    t is +-inf when every difference is the same non-zero number, nan when all are 0."""
    n = len(differences)
    if n < 2:
        raise ValueError(f"paired_t needs at least 2 seeds, got {n}.")
    s = mean_std(differences)
    if s["std"] == 0.0:
        return (math.copysign(math.inf, s["mean"]) if s["mean"] else math.nan), n - 1
    return s["mean"] / (s["std"] / math.sqrt(n)), n - 1


def sign_agreement(differences: Sequence[float], expected_sign: int) -> int:
    """How many seeds have a difference of the expected sign (+1 or -1; 0 never agrees)."""
    if expected_sign not in (1, -1):
        raise ValueError(f"expected_sign must be +1 or -1, got {expected_sign}.")
    return sum(1 for d in differences if d * expected_sign > 0)


def is_beyond_noise(p: float | None, agree: int, n: int) -> bool:
    """The course's rule (see `RULE`): at least 3 seeds, p < 0.05 and at most one seed against
    the expected sign."""
    return p is not None and n >= MIN_SEEDS and p < ALPHA and n - agree <= MAX_DISAGREEING_SEEDS


def not_judged(n: int) -> str | None:
    """'not judged: 2 seeds, the rule needs 3' when `n` seeds are too few for the rule, else
    None: a reduced run is reported as too small to say, never as evidence against an effect."""
    if n >= MIN_SEEDS:
        return None
    return f"not judged: {n} seed{'' if n == 1 else 's'}, the rule needs {MIN_SEEDS}"


def judge(differences: Sequence[float], expected_sign: int | None = None) -> dict[str, Any]:
    """The course's verdict on per-seed paired differences (a - b, one per seed): mean ± std,
    t, df, two-sided p, seeds agreeing in sign, whether the rule judges at all (`judged`: at
    least 3 seeds), `beyond_noise`, and a printable `verdict` that names the rule. JSON-safe:
    undefined t or p are None. `expected_sign` (+1/-1) is the direction a claim predicts; by
    default the sign of the mean difference. Every verdict in the course comes from here."""
    diffs = [float(d) for d in differences]
    s = mean_std(diffs)
    n = s["n"]
    sign = expected_sign if expected_sign is not None else (-1 if s["mean"] < 0 else 1)
    agree = sign_agreement(diffs, sign)
    t: float | None = None
    p: float | None = None
    if n >= 2:
        t_value, df = paired_t(diffs)
        if math.isnan(t_value):  # every difference exactly 0
            p = 1.0
        else:
            p = two_sided_p(t_value, df)
            t = t_value if math.isfinite(t_value) else None
    beyond = is_beyond_noise(p, agree, n) and s["mean"] * sign > 0
    result = {
        "per_seed": diffs,
        "mean": s["mean"],
        "std": s["std"],
        "n": n,
        "se": s["std"] / math.sqrt(n) if n > 1 else None,
        "t": t,
        "df": n - 1 if n >= 2 else None,
        "p": p,
        "expected_sign": sign,
        "agree": agree,
        "judged": n >= MIN_SEEDS,
        "beyond_noise": beyond,
        "every_seed": bool(n >= MIN_SEEDS_FOR_EVERY_SEED and agree == n),
        "rule": RULE_NAME,
    }
    result["verdict"] = verdict(result)
    return result


def compare(
    a: Sequence[float] | Mapping[Any, float],
    b: Sequence[float] | Mapping[Any, float] | float,
    expected_sign: int | None = None,
) -> dict[str, Any]:
    """Paired comparison of a vs b: `judge` on the differences a - b per seed (sequences pair by
    position, mappings by seed, a number is a constant baseline; see `paired_differences`)."""
    return judge(paired_differences(a, b), expected_sign)


def verdict_label(
    result: Mapping[str, Any], yes: str = "beyond noise", no: str = "within noise"
) -> str:
    """The verdict word of a `judge` result: 'not judged: N seeds, the rule needs 3' with too
    few seeds, else `yes` or `no` (the labs say 'shows its effect' / 'does not show its
    effect'; the rule is the same)."""
    return not_judged(result["n"]) or (yes if result["beyond_noise"] else no)


def verdict(result: Mapping[str, Any], digits: int = 3) -> str:
    """One line for a `judge`/`compare` result, e.g. 'beyond noise: +0.123 ± 0.015 (t = 13.98,
    p = 0.0051, sign + in 3 of 3 seeds; course rule: ...)'. Says 'in every seed' only with
    >= 5 seeds, and 'not judged: 2 seeds, the rule needs 3' below 3 seeds."""
    n, agree = result["n"], result["agree"]
    size = f"{result['mean']:+.{digits}f} ± {result['std']:.{digits}f}"
    t = "t undefined" if result["t"] is None else f"t = {result['t']:.2f}"
    p = "p undefined" if result["p"] is None else f"p {format_p(result['p'])}"
    seeds = (
        f"same sign in every one of {n} seeds"
        if result.get("every_seed")
        else f"sign {'+' if result['expected_sign'] > 0 else '-'} in {agree} of {n} seeds"
    )
    return f"{verdict_label(result)}: {size} ({t}, {p}, {seeds}; {RULE_NAME})"


def format_p(p: float) -> str:
    """'= 0.012' (two significant digits), or '< 0.001' below that."""
    return "< 0.001" if p < 0.001 else f"= {p:.2g}"
