"""Power as the field states it, checked against scipy.stats: MDE with t quantiles, TOST, seed counts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from simlab.analysis.statistics import power
from simlab.errors import ConfigError


@pytest.mark.parametrize(("df", "factor"), [(3, 4.16), (7, 3.26), (math.inf, 2.80)])
def test_mde_factors_the_science_notes_quote(df: float, factor: float) -> None:
    assert power.mde_factor(df) == pytest.approx(factor, abs=0.01)
    assert power.mde_factor(df) == pytest.approx(sps.t.ppf(0.975, df) + sps.t.ppf(0.8, df) if math.isfinite(df)
                                                 else sps.norm.ppf(0.975) + sps.norm.ppf(0.8))


@pytest.mark.parametrize("n", [4, 8, 16])
def test_the_mde_is_detected_with_the_stated_power(n: int) -> None:
    """The exact power of a two-sided one-sample t test at the MDE (scipy's noncentral t) is about 80%."""
    se = 1.0
    mde = power.min_detectable_effect(se, n - 1)
    crit = sps.t.ppf(0.975, n - 1)
    exact = sps.nct.sf(crit, n - 1, mde / se) + sps.nct.cdf(-crit, n - 1, mde / se)
    assert exact == pytest.approx(0.8, abs=0.03)


def test_tost_matches_two_one_sided_t_tests() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0.4, 1.5, size=8)
    d, se, df, margin = x.mean(), x.std(ddof=1) / math.sqrt(8), 7, 2.0
    got = power.tost(d, se, df, margin)
    lower = sps.ttest_1samp(x, -margin, alternative="greater").pvalue
    upper = sps.ttest_1samp(x, margin, alternative="less").pvalue
    assert got.p_lower == pytest.approx(lower) and got.p_upper == pytest.approx(upper)
    assert got.p == pytest.approx(max(lower, upper))
    assert got.equivalent == (max(lower, upper) < 0.05)
    # the 90% interval inside the margin is the same decision
    assert got.equivalent == (-margin < got.low and got.high < margin)


def test_tost_decides_a_tight_tie_and_not_a_loose_one() -> None:
    assert power.tost(0.1, 0.3, 7, 2.0).equivalent
    assert not power.tost(0.1, 1.5, 7, 2.0).equivalent
    assert power.tost(0.0, 0.0, 7, 2.0).equivalent  # identical arms
    assert not power.tost(3.0, 0.0, 7, 2.0).equivalent
    with pytest.raises(ValueError, match="margin"):
        power.tost(0.0, 1.0, 7, 0.0)


def test_seed_counts_by_hand() -> None:
    # s = 6 points per seed, a 5-point effect at 80%: the smallest n with (t_.975 + t_.8)(n-1) * 6 / sqrt(n) <= 5
    n = power.seeds_for_effect(6.0, 5.0)
    assert n is not None
    factor = lambda k: sps.t.ppf(0.975, k - 1) + sps.t.ppf(0.8, k - 1)  # noqa: E731
    assert factor(n) * 6 / math.sqrt(n) <= 5 < factor(n - 1) * 6 / math.sqrt(n - 1)
    assert n == 14
    tie = power.seeds_for_tie(6.0, 5.0)
    assert tie is not None and (sps.t.ppf(0.95, tie - 1) + sps.t.ppf(0.9, tie - 1)) * 6 / math.sqrt(tie) <= 5
    # a variance no seed count removes (a shared held-out set) larger than the target: never decided
    assert power.seeds_for_tie(6.0, 2.0, fixed_var=2.0**2) is None
    assert power.seeds_for_effect(0.0, 5.0) == 2


@pytest.mark.parametrize(
    ("alpha", "pw", "key"), [(0.0, 0.8, "--alpha"), (0.6, 0.8, "--alpha"), (0.05, 1.0, "--power"),
                             (0.05, 0.3, "--power")],
)
def test_levels_are_checked(alpha: float, pw: float, key: str) -> None:
    with pytest.raises(ConfigError, match=f"`{key}="):
        power.check_levels(alpha, pw)


def test_two_sided_p_by_hand() -> None:
    # 2 SE at df 7 is p 0.086, not 0.05: the t(7) cut is 2.36 SE
    assert power.two_sided_p(2.0, 1.0, 7) == pytest.approx(0.0856, abs=1e-4)
    assert power.two_sided_p(-2.365, 1.0, 7) == pytest.approx(0.05, abs=1e-3)
    assert power.two_sided_p(1.96, 1.0, math.inf) == pytest.approx(0.05, abs=1e-4)
    assert (power.two_sided_p(0.3, 0.0, 7), power.two_sided_p(0.0, 0.0, 7)) == (0.0, 1.0)
    assert math.isnan(power.two_sided_p(1.0, math.nan, 7)) and math.isnan(power.two_sided_p(1.0, 1.0, math.nan))


def test_two_sided_p_matches_scipy_ttest() -> None:
    d = np.array([-5.0, -7.0, -6.0, -4.0, -8.5])
    se = d.std(ddof=1) / math.sqrt(d.size)
    assert power.two_sided_p(float(d.mean()), se, d.size - 1) == pytest.approx(sps.ttest_1samp(d, 0.0).pvalue)


def test_holm_by_hand() -> None:
    # sorted 0.01, 0.03, 0.04 -> 3 x 0.01 = 0.03, 2 x 0.03 = 0.06, max(0.06, 1 x 0.04) = 0.06
    assert power.holm([0.04, 0.01, 0.03]) == pytest.approx([0.06, 0.03, 0.06])
    # a NaN is left out of the family: m = 2
    got = power.holm([0.02, math.nan, 0.04])
    assert got[0] == pytest.approx(0.04) and math.isnan(got[1]) and got[2] == pytest.approx(0.04)
    assert power.holm([0.6, 0.9]) == [1.0, 1.0] and power.holm([]) == []


def test_holm_matches_the_step_down_procedure() -> None:
    # the published step-down: reject in order while p_(i) < a / (m - i + 1); adjusted p < a iff rejected
    rng = np.random.default_rng(3)
    for _ in range(200):
        ps = list(rng.uniform(0, 0.2, size=rng.integers(1, 12)))
        m, rejected = len(ps), set()
        for rank, i in enumerate(sorted(range(m), key=ps.__getitem__)):
            if ps[i] >= 0.05 / (m - rank):
                break
            rejected.add(i)
        assert {i for i, p in enumerate(power.holm(ps)) if p < 0.05} == rejected


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20))
def test_holm_properties(ps: list[float]) -> None:
    adjusted = power.holm(ps)
    assert all(p <= a <= 1.0 for p, a in zip(ps, adjusted, strict=True))
    order = sorted(range(len(ps)), key=ps.__getitem__)
    assert all(adjusted[i] <= adjusted[j] for i, j in itertools.pairwise(order))  # monotone in the raw p
