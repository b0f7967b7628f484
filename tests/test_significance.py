"""attnid.report.significance: the paired t-test's p-value and Holm's step-down correction."""

import math

import numpy as np
import pytest

from attnid.report.significance import holm, incomplete_beta, t_test_pvalue
from attnid.training.analysis import T975, t_interval


def test_the_p_value_at_the_t_quantile_is_five_percent():
    """p(|T_df| >= t_{0.975, df}) = 0.05 for every tabulated df (the table has three decimals)."""
    for df, t in enumerate(T975, start=1):
        assert incomplete_beta(df / 2, 0.5, df / (df + t * t)) == pytest.approx(0.05, abs=2e-4)


def test_incomplete_beta_against_closed_forms():
    # I_x(a, 1) = x^a, I_x(1, b) = 1 - (1 - x)^b, I_x(2, 3) = 1 - (1 - x)^4 - 4x (1 - x)^3 (0.5248 at x = 0.4)
    for x in (0.1, 0.5, 0.9):
        assert incomplete_beta(2.5, 1, x) == pytest.approx(x**2.5, rel=1e-12)
        assert incomplete_beta(1, 3.5, x) == pytest.approx(1 - (1 - x) ** 3.5, rel=1e-12)
    assert incomplete_beta(2, 3, 0.4) == pytest.approx(0.5248, rel=1e-12)
    assert incomplete_beta(2, 3, 0.0) == 0.0 and incomplete_beta(2, 3, 1.0) == 1.0


def test_p_below_five_percent_exactly_when_the_95_interval_excludes_zero():
    rng = np.random.default_rng(0)
    for n in (3, 5, 25):
        for shift in np.linspace(-1.5, 1.5, 13):
            x = rng.normal(shift, 1, n)
            low, high = t_interval(x)
            assert (t_test_pvalue(x) < 0.05) == (low > 0 or high < 0)


def test_degenerate_samples():
    assert math.isnan(t_test_pvalue([1.0]))
    assert t_test_pvalue([0.0, 0.0, 0.0]) == 1.0 and t_test_pvalue([2.0, 2.0]) == 0.0
    assert t_test_pvalue([1, 2, 3, 4, 5]) == pytest.approx(0.013236, abs=1e-6)  # t = 4.243, 4 df


def test_holm_steps_down_and_stops_at_the_first_kept_hypothesis():
    # sorted: 0.005 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2: stop (0.04 is kept although 0.04 <= 0.05)
    assert holm([0.01, 0.04, 0.03, 0.005]).tolist() == [True, False, False, True]
    assert holm([0.01, math.nan, 0.02]).tolist() == [True, False, True]  # NaN: not tested, not counted
    assert holm([0.2, 0.3]).tolist() == [False, False] and holm([]).tolist() == []
    p = np.random.default_rng(1).uniform(0, 0.1, 40)
    assert (holm(p) >= (p <= 0.05 / len(p))).all()  # at least Bonferroni's rejections
