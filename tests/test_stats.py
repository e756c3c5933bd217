"""course_lib.stats against closed forms, printed t tables and a textbook paired t-test."""

import math

import pytest

from course_lib import stats

# Student's sleep data (Cushny & Peebles 1905), the paired example of R's t.test: extra hours of
# sleep of 10 patients under two drugs. R: t = -4.0621, df = 9, p-value = 0.002833,
# mean difference -1.58.
SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_incomplete_beta_closed_forms_and_symmetry():
    for x in (0.0, 0.03, 0.3, 0.5, 0.77, 0.999, 1.0):
        assert stats.regularized_incomplete_beta(x, 1, 1) == pytest.approx(x, abs=1e-12)
        assert stats.regularized_incomplete_beta(x, 3, 1) == pytest.approx(x**3, abs=1e-12)
        assert stats.regularized_incomplete_beta(x, 1, 4) == pytest.approx(
            1 - (1 - x) ** 4, abs=1e-12
        )
        assert stats.regularized_incomplete_beta(x, 2.5, 0.5) == pytest.approx(
            1 - stats.regularized_incomplete_beta(1 - x, 0.5, 2.5), abs=1e-12
        )
    # I_x(1/2, 1/2) = (2 / pi) asin(sqrt(x)), the arcsine distribution.
    assert stats.regularized_incomplete_beta(0.2, 0.5, 0.5) == pytest.approx(
        2 / math.pi * math.asin(math.sqrt(0.2)), abs=1e-12
    )


@pytest.mark.parametrize("t", [0.0, 0.4, 1.0, 2.5, 7.0, 40.0])
def test_t_distribution_closed_forms(t):
    # df = 1 is the Cauchy distribution; df = 2 has P(|T| >= t) = 1 - t / sqrt(2 + t^2).
    assert stats.two_sided_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(t), abs=1e-12)
    assert stats.two_sided_p(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), abs=1e-12)
    assert stats.student_t_cdf(t, 5) + stats.student_t_cdf(-t, 5) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("df", "t95", "t99"),
    [
        (1, 12.706, 63.657),
        (2, 4.303, 9.925),
        (3, 3.182, 5.841),
        (4, 2.776, 4.604),
        (5, 2.571, 4.032),
        (9, 2.262, 3.250),
        (10, 2.228, 3.169),
        (30, 2.042, 2.750),
    ],
)
def test_two_sided_p_matches_printed_t_table(df, t95, t99):
    # Printed critical values have 3 decimals, so p agrees to about 1e-4.
    assert stats.two_sided_p(t95, df) == pytest.approx(0.05, abs=1e-4)
    assert stats.two_sided_p(-t95, df) == pytest.approx(0.05, abs=1e-4)
    assert stats.two_sided_p(t99, df) == pytest.approx(0.01, abs=2e-5)


def test_large_df_tends_to_the_normal():
    assert stats.two_sided_p(1.959964, 10**8) == pytest.approx(0.05, abs=1e-6)
    assert stats.student_t_cdf(1.644854, 10**8) == pytest.approx(0.95, abs=1e-6)


def test_paired_t_on_students_sleep_data():
    result = stats.compare(SLEEP_1, SLEEP_2)
    assert result["mean"] == pytest.approx(-1.58)
    assert result["t"] == pytest.approx(-4.0621, abs=1e-4)
    assert result["df"] == 9
    assert result["p"] == pytest.approx(0.002833, abs=1e-6)
    assert result["agree"] == 9  # one patient slept the same under both drugs
    assert result["beyond_noise"] is True
    assert result["every_seed"] is False


def test_mean_std_is_the_sample_std():
    s = stats.mean_std([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert s == {"mean": 5.0, "std": pytest.approx(math.sqrt(32 / 7)), "n": 8}
    assert stats.mean_std([3.0])["std"] == 0.0
    with pytest.raises(ValueError, match="at least one value"):
        stats.mean_std([])


def test_paired_differences_by_position_by_seed_and_against_a_constant():
    assert stats.paired_differences([3, 5], [1, 1]) == [2.0, 4.0]
    assert stats.paired_differences({2: 5.0, 0: 3.0}, {0: 1.0, 2: 2.0}) == [3.0, 2.0]
    assert stats.paired_differences([0.6, 0.4], 0.5) == pytest.approx([0.1, -0.1])
    with pytest.raises(ValueError, match="one value per seed"):
        stats.paired_differences([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match=r"seeds \[1\]"):
        stats.paired_differences({0: 1.0, 1: 2.0}, {0: 1.0})


def test_rule_needs_both_p_and_sign_agreement():
    # t = 2.8 with 3 seeds (ALBERT's NSP head vs the majority class): p ~ 0.11, within noise.
    result = stats.compare([0.532, 0.548, 0.521], 0.50)
    assert 0.05 < result["p"] < 0.2 and result["agree"] == 3
    assert result["beyond_noise"] is False
    assert result["verdict"].startswith("within noise")
    # Big and consistent: beyond noise, but 3 seeds never say "every seed".
    result = stats.compare([0.61, 0.64, 0.62], 0.50)
    assert result["t"] == pytest.approx(13.98, abs=0.01)
    assert result["p"] == pytest.approx(0.005074, abs=1e-5)
    assert result["beyond_noise"] is True and result["every_seed"] is False
    assert "sign + in 3 of 3 seeds" in result["verdict"]
    # p < 0.05 but two of six seeds the other way: not beyond noise.
    diffs = [5.0, 5.0, 5.0, 5.0, -0.1, -0.1]
    result = stats.compare(diffs, 0.0)
    assert result["p"] < 0.05 and result["agree"] == 4
    assert result["beyond_noise"] is False
    # One seed of six against: allowed; five of five for: "every seed".
    assert stats.compare([5.0, 5.2, 4.9, 5.1, 5.0, -0.1], 0.0)["beyond_noise"] is True
    five = stats.compare([1.0, 1.1, 0.9, 1.2, 1.0], 0.0)
    assert five["every_seed"] is True and "every one of 5 seeds" in five["verdict"]


def test_expected_sign_against_the_data_is_never_beyond_noise():
    result = stats.compare([0.61, 0.64, 0.62], 0.50, expected_sign=-1)
    assert result["agree"] == 0 and result["beyond_noise"] is False


def test_degenerate_cases_are_json_safe():
    same = stats.compare([0.3, 0.3, 0.3], [0.1, 0.1, 0.1])  # zero spread, non-zero difference
    assert same["t"] is None and same["p"] == 0.0 and same["beyond_noise"] is True
    zero = stats.compare([0.3, 0.3], [0.3, 0.3])
    assert zero["p"] == 1.0 and zero["beyond_noise"] is False
    one = stats.compare([0.9], [0.1])
    assert one["t"] is None and one["p"] is None and one["beyond_noise"] is False
    assert "t undefined" in one["verdict"]


def test_bad_arguments_name_the_fix():
    with pytest.raises(ValueError, match="df must be > 0"):
        stats.two_sided_p(1.0, 0)
    with pytest.raises(ValueError, match=r"x must be in \[0, 1\]"):
        stats.regularized_incomplete_beta(1.5, 1, 1)
    with pytest.raises(ValueError, match="expected_sign must be"):
        stats.sign_agreement([1.0], 0)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        stats.paired_t([1.0])


def test_p_values_print_with_two_significant_digits():
    assert stats.format_p(0.01234) == "= 0.012"
    assert stats.format_p(0.0004) == "< 0.001"
    assert "p < 0.001" in stats.compare([1.0, 1.01, 0.99, 1.0], 0.0)["verdict"]


# ----- the one rule: not judged below 3 seeds; p and sign exactly at their thresholds ---------


@pytest.mark.parametrize("n", [1, 2])
def test_too_few_seeds_are_not_judged_and_say_the_counts(n):
    result = stats.judge([0.9, 0.95][:n], expected_sign=1)
    assert result["judged"] is False and result["beyond_noise"] is False
    seeds = "1 seed" if n == 1 else "2 seeds"
    assert result["verdict"].startswith(f"not judged: {seeds}, the rule needs 3: ")
    assert stats.not_judged(n) == f"not judged: {seeds}, the rule needs {stats.MIN_SEEDS}"
    assert stats.not_judged(stats.MIN_SEEDS) is None
    # however large the t: two seeds at p = 0.011 are still too few to judge
    two = stats.compare([0.61, 0.64], [0.50, 0.52])
    assert two["p"] < 0.05 and two["judged"] is False and two["beyond_noise"] is False


def test_three_seeds_are_the_fewest_the_rule_judges():
    result = stats.judge([0.11, 0.14, 0.12])
    assert result["judged"] is True and result["beyond_noise"] is True
    assert result["verdict"].startswith("beyond noise: ")


def _five_seeds_with_t(t: float) -> list[float]:
    """Five differences of mean 1 whose paired t is exactly `t` (one of them is negative)."""
    pattern = [-2.0, -1.0, 0.0, 1.0, 2.0]  # mean 0, sample std sqrt(2.5)
    k = math.sqrt(5) / (math.sqrt(2.5) * t)
    return [1.0 + k * z for z in pattern]


def test_p_threshold_is_exactly_005_two_sided_with_one_seed_against():
    t95 = 2.7764451  # two-sided 5% point of t with 4 degrees of freedom
    above, below = (
        stats.judge(_five_seeds_with_t(t95 * 1.001)),
        stats.judge(_five_seeds_with_t(t95 * 0.999)),
    )
    assert above["t"] == pytest.approx(t95 * 1.001) and above["agree"] == 4
    assert above["p"] < 0.05 < below["p"]
    assert above["beyond_noise"] is True and below["beyond_noise"] is False
    assert below["verdict"].startswith("within noise: ")
    # p exactly at alpha is not below it
    assert stats.is_beyond_noise(0.05, 5, 5) is False
    assert stats.is_beyond_noise(0.0499, 5, 5) is True


@pytest.mark.parametrize(
    ("n", "agree", "beyond"),
    [(3, 3, True), (3, 2, True), (3, 1, False), (6, 5, True), (6, 4, False), (2, 2, False)],
)
def test_sign_threshold_is_all_seeds_but_at_most_one(n, agree, beyond):
    assert stats.is_beyond_noise(0.001, agree, n) is beyond


def test_every_verdict_names_the_rule():
    for values in ([0.9], [0.9, 0.8], [0.9, 0.8, 0.85], [0.1, -0.1, 0.05, -0.02, 0.0]):
        assert stats.judge(values)["verdict"].endswith(f"; {stats.RULE_NAME})")
    assert stats.judge([0.9, 0.8, 0.85])["rule"] == stats.RULE_NAME
    assert "3 seeds" in stats.RULE and "p < 0.05" in stats.RULE  # the long form says the same
