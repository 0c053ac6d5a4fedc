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
