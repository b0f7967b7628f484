"""Paired tests over seeds and the Holm-Bonferroni correction for many of them (no scipy, no torch).

The training study compares many (task, optimizer, rebalancing mode) cells at once, each by the
paired differences of its runs (same task, optimizer, H and seed, with minus without rebalancing).
One cell is one two-sided one-sample t-test of mean zero,

    t = mean / (s / sqrt(n)),  p = P(|T_{n-1}| >= |t|) = I_{(n-1) / (n-1 + t^2)}((n-1)/2, 1/2),

with I the regularised incomplete beta function (:func:`t_test_pvalue`); the 95% t-interval of
the mean excludes zero exactly when p < 0.05. Testing m cells at 0.05 each finds about 0.05 m
false effects when none is real, so the cells of one measure are one family, corrected by
Holm's step-down procedure (Holm 1979, Scand. J. Statist. 6: 65-70; :func:`holm`): sort the
p-values, p_(1) <= ... <= p_(m), reject while p_(k) <= alpha / (m - k + 1), stop at the first
that is not. It keeps the probability of any false rejection in the family at most alpha, under
any dependence between the tests, and rejects at least what Bonferroni (p <= alpha / m) rejects.
"""

from __future__ import annotations

import math

import numpy as np


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes 6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        even = m * (b - m) * x / ((qam + 2 * m) * (a + 2 * m))
        odd = -(a + m) * (qab + m) * x / ((a + 2 * m) * (qap + 2 * m))
        for numerator in (even, odd):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"incomplete_beta: x = {x} outside [0, 1]")
    if x in (0.0, 1.0):
        return x
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_test_pvalue(values) -> float:
    """Two-sided p-value of the one-sample t-test of mean zero (NaN dropped); NaN with fewer than two values.

    All values equal and nonzero (s = 0) give p = 0; all zero give p = 1."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n < 2:
        return math.nan
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    if sd == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = mean / (sd / math.sqrt(n))
    df = n - 1
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def holm(pvalues, alpha: float = 0.05) -> np.ndarray:
    """Holm's step-down rejections (a boolean per p-value, in the given order) at family-wise level `alpha`.

    NaN p-values (cells that cannot be tested) are never rejected and do not count in the family size."""
    p = np.asarray(pvalues, dtype=float)
    reject = np.zeros(len(p), dtype=bool)
    tested = np.flatnonzero(np.isfinite(p))
    m = len(tested)
    for rank, i in enumerate(tested[np.argsort(p[tested], kind="stable")]):
        if p[i] > alpha / (m - rank):
            break
        reject[i] = True
    return reject
