"""simlab.analysis.statistics.stats: hand-computed SEs, the seed-spread combination, sigma, like-for-like, ranking."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simlab.analysis.statistics import power, stats
from simlab.errors import ConfigError

rates = st.floats(0.0, 1.0, allow_nan=False)
counts = st.integers(1, 10_000)


# ------------------------------------------------------------------------------ binomial errors
def test_binomial_se_hand_cases() -> None:
    assert stats.binomial_se(0.5, 100) == pytest.approx(5.0)  # 100 sqrt(0.25 / 100)
    assert stats.binomial_se(0.1, 900) == pytest.approx(1.0)  # 100 sqrt(0.09 / 900)
    assert stats.binomial_se(0.0, 50) == 0.0 and stats.binomial_se(1.0, 50) == 0.0


def test_se_diff_hand_cases() -> None:
    assert stats.se_diff(0.5, 100, 0.5, 100) == pytest.approx(math.sqrt(50))
    # 100 sqrt(0.445 * 0.555 / 128 + 0.477 * 0.523 / 128) = 100 sqrt(0.0019295 + 0.0019490)
    assert stats.se_diff(0.445, 128, 0.477, 128) == pytest.approx(6.2277, abs=1e-4)
    assert stats.se_diff(0.3, 100, 0.0, 1) == pytest.approx(stats.binomial_se(0.3, 100))


@pytest.mark.parametrize(("p", "n"), [(44.5, 128), (-0.1, 10), (float("nan"), 10), (0.5, 0), (0.5, 1.5)])
def test_binomial_rejects_points_and_bad_counts(p: float, n: float) -> None:
    with pytest.raises(ValueError, match="is invalid"):
        stats.binomial_se(p, n)  # type: ignore[arg-type]


@given(rates, counts, rates, counts)
def test_se_diff_is_symmetric(p1: float, n1: int, p2: float, n2: int) -> None:
    assert stats.se_diff(p1, n1, p2, n2) == pytest.approx(stats.se_diff(p2, n2, p1, n1))


# ---------------------------------------------------------------------------- means over seeds
def test_rate_mean_se_single_seed_is_binomial() -> None:
    m = stats.rate_mean_se([0.445], [128])
    assert (m.mean, m.seeds, m.episodes) == (pytest.approx(44.5), 1, 128)
    assert m.se == pytest.approx(stats.binomial_se(0.445, 128))
    assert math.isnan(m.se_seeds) and m.dominant == "binomial"


def test_rate_mean_se_seed_spread_dominates() -> None:
    # rates 50/60/70 on 100 episodes each: V_bin = (2500 + 2400 + 2100) / 100 / 9 = 70/9,
    # s^2 = 100, V_seed = 100/3 > V_bin, so V = V_seed.
    m = stats.rate_mean_se([0.5, 0.6, 0.7], 100)
    assert m.mean == pytest.approx(60.0)
    assert m.se_binomial == pytest.approx(math.sqrt(70 / 9))
    assert m.se_seeds == pytest.approx(math.sqrt(100 / 3))
    assert m.se == pytest.approx(math.sqrt(100 / 3)) and m.dominant == "seeds"
    assert m.episodes == 300


def test_rate_mean_se_binomial_floor() -> None:
    # Identical seeds: no observed spread, yet the finite evaluation still leaves V_bin = 2 * 25 / 4.
    m = stats.rate_mean_se([0.5, 0.5], [100, 100])
    assert m.se_seeds == 0.0
    assert m.se == pytest.approx(math.sqrt(12.5)) and m.dominant == "binomial"


def test_rate_mean_se_rejects_mismatched_counts() -> None:
    with pytest.raises(ValueError, match="one count per rate"):
        stats.rate_mean_se([0.5, 0.6, 0.7], [100, 100])
    with pytest.raises(ValueError, match="non-empty"):
        stats.rate_mean_se([], [])


@given(st.lists(rates, min_size=2, max_size=8), counts)
def test_combined_se_is_the_larger_source(ps: list[float], n: int) -> None:
    m = stats.rate_mean_se(ps, n)
    assert m.se == pytest.approx(max(m.se_binomial, m.se_seeds), abs=1e-9)
    assert m.se >= m.se_binomial - 1e-12


def test_mean_se_any_objective() -> None:
    m = stats.mean_se([1.0, 2.0, 3.0])
    assert (m.mean, m.se, m.se_binomial) == (pytest.approx(2.0), pytest.approx(1 / math.sqrt(3)), 0.0)
    assert m.dominant == "seeds"
    assert math.isnan(stats.mean_se([4.0]).se)


# ---------------------------------------------------------------------------------- differences
def test_difference_of_two_published_rates_matches_se_diff() -> None:
    d = stats.difference(stats.rate_mean_se([0.477], 128), stats.rate_mean_se([0.445], 128))
    assert d.difference == pytest.approx(3.2)
    assert d.se == pytest.approx(stats.se_diff(0.445, 128, 0.477, 128))
    assert d.sigma == pytest.approx(3.2 / d.se) and d.dominant == "binomial"


def test_difference_reports_seed_dominance() -> None:
    a = stats.rate_mean_se([0.5, 0.6, 0.7], 100)
    b = stats.rate_mean_se([0.5, 0.5, 0.5], 100)
    d = stats.difference(a, b)
    assert d.se == pytest.approx(math.hypot(a.se, b.se))
    assert d.dominant == "seeds"  # 100/3 against 70/9 + 25/3


def test_significance_edge_cases() -> None:
    assert stats.significance(3.0, 1.5) == 2.0
    assert stats.significance(-1.0, 0.0) == -math.inf
    assert math.isnan(stats.significance(0.0, 0.0)) and math.isnan(stats.significance(1.0, math.nan))
    with pytest.raises(ValueError, match="se=-1"):
        stats.significance(1.0, -1.0)


@given(rates, counts, rates, counts)
def test_sigma_sign_follows_difference(p1: float, n1: int, p2: float, n2: int) -> None:
    d = stats.difference(stats.rate_mean_se([p1], n1), stats.rate_mean_se([p2], n2))
    if d.difference == 0:
        assert d.sigma == 0 or math.isnan(d.sigma)
    else:
        assert np.sign(d.sigma) == np.sign(d.difference)


@pytest.mark.parametrize(
    ("sigma", "word"),
    [
        (0.51, "within noise"),
        (-1.5, "not significant"),
        (2.0, "significant (>=2"),
        (-2.06, "significant (>=2"),
    ],
)
def test_describe_sigma(sigma: float, word: str) -> None:
    assert stats.describe_sigma(sigma).startswith(word)


# ----------------------------------------------------------------------------- like for like
def test_effective_horizon_and_like_for_like() -> None:
    assert stats.effective_horizon(4, 7) == 32.0 == stats.effective_horizon(32, 0)
    assert stats.like_for_like(stats.effective_horizon(4, 7), 32.0).matched
    lfl = stats.like_for_like(stats.effective_horizon(64, 2), stats.effective_horizon(64, 0))
    assert lfl.ratio == 3.0 and not lfl.matched
    for bad in ((0, 1), (4, -1), (4, 1.5), (True, 1)):
        with pytest.raises(ConfigError, match="is invalid"):
            stats.effective_horizon(*bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ ranking
def test_rank_hand_cases() -> None:
    # at df 7: 10 vs 8 and 8 vs 6 are 1.41 SE apart (p 0.20 each); 10 vs 6 is 2.83 SE (p 0.025, Holm x3 0.076)
    assert stats.rank_with_ties([10, 8, 6], [1, 1, 1], [7, 7, 7]).tolist() == [1, 1, 1]
    # 10 vs 4 at 4.24 SE: p 0.0038, Holm 0.011 -> decided; 10 vs 7 and 7 vs 4 at 2.12 SE: p 0.071 -> ties
    assert stats.rank_with_ties([10, 7, 4], [1, 1, 1], [7, 7, 7]).tolist() == [1, 1, 2]
    assert stats.rank_with_ties([10, 7, 4], [1, 1, 1], [7, 7, 7], higher_is_better=False).tolist() == [2, 1, 1]
    assert stats.rank_with_ties([10, 0], [math.nan, 1], [7, 7]).tolist() == [1, 1]  # unknown SE: a tie
    assert stats.rank_with_ties([3, 1], [0, 0], [7, 7]).tolist() == [1, 2]  # exact values
    with pytest.raises(ValueError, match="one length"):
        stats.rank_with_ties([1, 2], [1], [7, 7])


def test_a_pair_decided_alone_is_a_tie_after_holm_over_every_pair() -> None:
    # the recipe ranking's case: a pair at p 0.022 alone, among six pairs, is not decided (Holm 0.13)
    lead = 2.8  # t at df 7 for p about 0.027
    m = [lead, 0.0, 0.0, 0.0]
    assert power.two_sided_p(lead, 1.0, 7) < 0.05
    assert stats.rank_with_ties(m, [1 / math.sqrt(2)] * 4, [7] * 4).tolist() == [1, 1, 1, 1]


means = st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=6)


@settings(max_examples=60)
@given(means, st.data())
def test_rank_follows_holm_over_every_pair(m: list[float], data: st.DataObject) -> None:
    se = data.draw(st.lists(st.floats(0.01, 50), min_size=len(m), max_size=len(m)))
    ranks = stats.rank_with_ties(m, se, [7] * len(m))
    mean, s = np.asarray(m), np.asarray(se)
    pairs = [(i, j) for i in range(len(m)) for j in range(i + 1, len(m))]
    ps = power.holm([power.two_sided_p(float(mean[j] - mean[i]), float(np.hypot(s[i], s[j])), 7) for i, j in pairs])
    if all(p >= power.ALPHA for p in ps):
        assert np.all(ranks == 1)
    for (i, j), p in zip(pairs, ps, strict=True):
        if p < power.ALPHA:  # the leader ranks ahead
            lead, lag = (j, i) if mean[j] > mean[i] else (i, j)
            assert ranks[lag] > ranks[lead]
    order = np.argsort(mean)  # ranks depend on values, not positions
    assert stats.rank_with_ties(mean[order], s[order], [7] * len(m)).tolist() == ranks[order].tolist()


def test_rate_mean_se_on_one_shared_held_out_set_adds_the_instance_bound() -> None:
    # three seeds played the same 256 instances: not 768 independent episodes. The spread of 0.5, 0.5, 0.512
    # joins the bound p (1 - p) / 256 on the instance term
    rates = [0.5, 0.5, 0.512]
    own = stats.rate_mean_se(rates, 256)
    shared = stats.rate_mean_se(rates, 256, shared=True)
    p = sum(rates) / 3
    v_seed = float(np.var(np.array(rates) * 100, ddof=1)) / 3
    assert shared.se == pytest.approx(math.sqrt(v_seed + 1e4 * p * (1 - p) / 256))
    assert shared.se > own.se and shared.episodes == 256
    # the README's base arm of old: 50.4 +- 1.8 counted 3 x 256 episodes; on the 256 really played, +- 3.1
    assert stats.rate_mean_se([0.504] * 3, 256, shared=True).se == pytest.approx(3.12, abs=0.01)


def test_iqm_trims_a_quarter_from_each_end():
    assert stats.iqm([1, 2, 3, 4, 100]) == 3.0  # int(1.25) = 1 value cut from each end
    assert stats.iqm([10, 20, 30]) == 20.0  # three values: nothing cut
    x = np.arange(8.0)
    assert stats.iqm(x) == pytest.approx(np.mean(x[2:6]))
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for n in (4, 5, 9, 16):
        v = rng.normal(size=n)
        assert stats.iqm(v) == pytest.approx(scipy_stats.trim_mean(v, 0.25))


def test_bootstrap_interval_is_deterministic_and_stratified():
    x = [50.0, 52.0, 61.0, 70.0, 48.0, 55.0]
    low, high = stats.bootstrap_ci(x)
    assert (low, high) == stats.bootstrap_ci(x)
    assert min(x) <= low < np.mean(x) < high <= max(x)
    assert stats.bootstrap_ci([42.0]) == (42.0, 42.0)
    # two strata whose levels differ: resampling within strata keeps one value from each, so every
    # resampled mean lies between the strata means' extremes
    strat = stats.bootstrap_ci([0.0, 2.0, 100.0, 102.0], strata=["a", "a", "b", "b"])
    assert 50.0 <= strat[0] <= strat[1] <= 52.0
    with pytest.raises(ValueError, match="strata"):
        stats.bootstrap_ci([1.0, 2.0], strata=["a"])


def test_ranks_use_paired_ses_where_given():
    means, ses = [50.0, 53.0], [2.0, 2.0]  # unpaired: 3 / 2.83 = 1.06 SE, a tie
    assert stats.rank_with_ties(means, ses, [7, 7]).tolist() == [1, 1]
    paired = np.array([[np.nan, 1.0], [1.0, np.nan]])  # paired: 3 SE at df 7, p 0.02
    assert stats.rank_with_ties(means, ses, [7, 7], pair_se=paired, pair_df=np.full((2, 2), 7.0)).tolist() == [2, 1]
