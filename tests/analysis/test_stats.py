"""simlab.analysis.stats: hand-computed SEs, the seed-spread combination, sigma, like-for-like, ranking."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simlab.analysis import stats

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
        with pytest.raises(ValueError, match="is invalid"):
            stats.effective_horizon(*bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ ranking
def test_rank_hand_cases() -> None:
    # 10 vs 8 and 8 vs 6 are 1.41 sigma apart (ties); 10 vs 6 is 2.83 sigma.
    assert stats.rank_with_ties([10, 8, 6], [1, 1, 1]).tolist() == [1, 1, 2]
    assert stats.rank_with_ties([10, 8, 6], [1, 1, 1], higher_is_better=False).tolist() == [2, 1, 1]
    assert stats.rank_with_ties([10, 0], [math.nan, 1]).tolist() == [1, 1]  # unknown SE: a tie
    assert stats.rank_with_ties([3, 1], [0, 0]).tolist() == [1, 2]  # exact values
    with pytest.raises(ValueError, match="one length"):
        stats.rank_with_ties([1, 2], [1])


means = st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=6)


@settings(max_examples=60)
@given(means, st.data())
def test_rank_ties_under_two_sigma(m: list[float], data: st.DataObject) -> None:
    se = data.draw(st.lists(st.floats(0.01, 50), min_size=len(m), max_size=len(m)))
    ranks = stats.rank_with_ties(m, se)
    mean, s = np.asarray(m), np.asarray(se)
    z = (mean[None, :] - mean[:, None]) / np.hypot(s[:, None], s[None, :])  # j over i
    if np.all(np.abs(z) < stats.TIE_SIGMA):
        assert np.all(ranks == 1)
    for i, j in zip(*np.nonzero(z >= stats.TIE_SIGMA), strict=True):
        assert ranks[i] > ranks[j]  # j significantly beats i
    # Ranks depend on values, not positions.
    order = np.argsort(mean)
    assert stats.rank_with_ties(mean[order], s[order]).tolist() == ranks[order].tolist()


# ------------------------------------------------------------------------ per-variant tables
def _runs() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "variant": ["base", "base", "base", "wide", "wide", "wide", "lost"],
            "success": [0.5, 0.5, 0.5, 0.5, 0.6, None, None],
            "episodes": [100, 100, 100, 100, 100, 100, 100],
            "horizon": [32.0, 32.0, 32.0, 96.0, 96.0, 96.0, 32.0],
        }
    )


def test_variant_summary_pools_seeds_and_counts_missing() -> None:
    s = stats.variant_summary(
        _runs(), variant="variant", rate="success", episodes="episodes", horizon="horizon"
    )
    assert s["variant"].to_list() == ["base", "wide", "lost"]
    assert s["seeds"].to_list() == [3, 2, 0] and s["missing"].to_list() == [0, 1, 1]
    wide = s.row(1, named=True)
    expected = stats.rate_mean_se([0.5, 0.6], [100, 100])
    assert wide["mean"] == pytest.approx(55.0) and wide["se"] == pytest.approx(expected.se)
    assert wide["dominant"] == expected.dominant
    assert s.row(2, named=True)["mean"] is None


def test_against_baseline_difference_like_for_like_and_rank() -> None:
    s = stats.variant_summary(
        _runs(), variant="variant", rate="success", episodes="episodes", horizon="horizon"
    )
    t = stats.against_baseline(s, "base", variant="variant", horizon="horizon")
    base, wide, lost = t.to_dicts()
    assert base["difference"] == 0.0 and base["like_for_like"] is True
    assert wide["difference"] == pytest.approx(5.0)
    assert wide["se_difference"] == pytest.approx(math.hypot(base["se"], wide["se"]))
    assert wide["sigma"] == pytest.approx(5.0 / wide["se_difference"])
    assert wide["horizon_ratio"] == 3.0 and wide["like_for_like"] is False
    assert (base["rank"], wide["rank"], lost["rank"]) == (1, 1, None)  # 5 points on 100 episodes: a tie
    with pytest.raises(ValueError, match=r"choose one of \['base', 'wide', 'lost'\]"):
        stats.against_baseline(s, "nope", variant="variant")
    with pytest.raises(ValueError, match="missing"):
        stats.variant_summary(_runs(), variant="cell", rate="success", episodes="episodes")


# ------------------------------------------------------------------ paired differences and power
def test_paired_difference_by_hand():
    # d = 5, 8, -1, 10 -> mean 5.5; s_d^2 = ((-0.5)^2 + 2.5^2 + 6.5^2 + 4.5^2) / 3 = 23 -> se = sqrt(23 / 4)
    d = stats.paired_difference([50, 60, 55, 70], [45, 52, 56, 60])
    assert d.difference == pytest.approx(5.5)
    assert d.se == pytest.approx(math.sqrt(23 / 4))
    assert d.dominant == "paired" and d.sigma == pytest.approx(5.5 / math.sqrt(23 / 4))


def test_pairing_removes_a_shared_seed_effect():
    # per-seed levels vary a lot (shared by both arms), the treatment adds 3 +- 1: paired beats unpaired
    base = np.array([20.0, 60.0, 35.0, 80.0, 50.0])
    treat = base + np.array([3.0, 2.0, 4.0, 3.0, 3.0])
    paired = stats.paired_difference(treat, base)
    unpaired = stats.difference(stats.mean_se(treat), stats.mean_se(base))
    assert paired.difference == pytest.approx(unpaired.difference) == pytest.approx(3.0)
    assert paired.se < unpaired.se / 10


def test_held_out_bound_by_hand():
    # one arm fails every episode: the per-episode difference is -y_b, its variance p_b (1 - p_b): exact
    assert stats.held_out_se(0.0, 56 / 512, 512) == pytest.approx(100 * math.sqrt(56 / 512 * 456 / 512 / 512))
    assert stats.held_out_se(0.0, 56 / 512, 512) == pytest.approx(stats.binomial_se(56 / 512, 512))
    # p_t = 0.6, p_b = 0.3: they disagree on at most 0.9 of the episodes, D = 0.3 -> sqrt((0.9 - 0.09) / 100)
    assert stats.held_out_se(0.6, 0.3, 100) == pytest.approx(100 * math.sqrt(0.81 / 100))
    assert stats.held_out_se(0.5, 0.5, 100) == pytest.approx(10.0)  # may disagree everywhere: sqrt(1 / 100)
    with pytest.raises(ValueError, match="fractions, not points"):
        stats.held_out_se(60.0, 30.0, 100)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
def test_held_out_bound_covers_every_joint_outcome(pairs: list[tuple[bool, bool]]) -> None:
    y = np.array(pairs, dtype=np.float64)  # per episode: (treatment succeeded, baseline succeeded)
    d = y[:, 0] - y[:, 1]
    exact = 100 * math.sqrt(d.var() / d.size)  # the paired per-episode SE the rates alone cannot give
    assert exact <= stats.held_out_se(float(y[:, 0].mean()), float(y[:, 1].mean()), d.size) + 1e-9


def test_a_difference_the_same_in_every_seed_gets_the_held_out_bound():
    t, b = [0.0, 0.0, 0.0, 0.0], [10.9375] * 4  # points; every seed: -10.9375
    assert stats.paired_difference(t, b).se == 0.0 and stats.paired_difference(t, b).dominant == "paired"
    d = stats.paired_difference(t, b, episodes=512)
    assert d.dominant == "held-out" and d.se == pytest.approx(stats.binomial_se(0.109375, 512))
    assert d.sigma == pytest.approx(-10.9375 / stats.binomial_se(0.109375, 512))
    spread = stats.paired_difference([0.0, 1.0, 0.0, 1.0], b, episodes=512)  # seeds differ: their SE stands
    assert spread.dominant == "paired" and spread.se == pytest.approx(0.5 / 2 * math.sqrt(4 / 3))
    same = stats.paired_difference(b, b, episodes=512)  # identical arms keep an SE of 0
    assert same.se == 0.0 and same.dominant == "paired"


def test_report_marks_a_held_out_se_and_asks_for_no_seeds():
    runs = pl.DataFrame({
        "variant": ["base"] * 3 + ["trained"] * 3, "seed": [0, 1, 2] * 2,
        "success": [0.2] * 3 + [0.0] * 3, "episodes": [100] * 6,
    })
    s = stats.variant_summary(runs, variant="variant", rate="success", episodes="episodes")
    t = stats.against_baseline(s, "base", variant="variant", per_seed=runs, rate="success")
    trained = t.row(1, named=True)
    assert trained["dominant_difference"] == "held-out" and trained["seeds_needed"] is None
    assert trained["se_difference"] == pytest.approx(stats.binomial_se(0.2, 100))
    assert trained["difference"] == pytest.approx(-20.0)


@pytest.mark.parametrize(
    ("t", "b", "match"),
    [([1, 2], [1, 2], "too few"), ([1, 2, 3], [1, 2], "aligned by seed"), ([1, math.nan, 3], [1, 2, 3], "finite")],
)
def test_paired_difference_bad_input(t, b, match):
    with pytest.raises(ValueError, match=match):
        stats.paired_difference(t, b)


def test_minimum_detectable_effect_and_seeds_needed_by_hand():
    assert stats.min_detectable_effect(3.0) == 6.0
    # se 3 over 4 seeds -> per-seed s = 6; a 5-point effect clears 2 sigma at n = (2 * 6 / 5)^2 = 5.76 -> 6
    assert stats.seeds_needed(3.0, 4, 5.0) == 6
    # the science notes' example: s = 6, 5 points -> about 6 seeds
    assert stats.seeds_needed(6.0, 1, 5.0) == 6
    assert stats.seeds_needed(3.0, 4, 10.0) == 2  # never fewer than two
    assert stats.seeds_needed(math.nan, 4, 5.0) is None
    with pytest.raises(ValueError, match="effect"):
        stats.seeds_needed(3.0, 4, 0.0)


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
    means, ses = [50.0, 53.0], [2.0, 2.0]  # unpaired: 3 / 2.83 = 1.06 sigma, a tie
    assert stats.rank_with_ties(means, ses).tolist() == [1, 1]
    paired = np.array([[np.nan, 1.0], [1.0, np.nan]])  # paired: 3 sigma
    assert stats.rank_with_ties(means, ses, pair_se=paired).tolist() == [2, 1]
