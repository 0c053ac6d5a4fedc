"""Contract tests over every registered estimator, normaliser and lambda reading."""

from __future__ import annotations

import numpy as np
import pytest

from simlab import SegmentBatch, advantages, loss_weights
from simlab.credit import (
    BASELINES,
    COSTS,
    ESTIMATORS,
    LAMBDA_READINGS,
    NORMALISERS,
    ROW_WEIGHTS,
    estimate,
    estimator_family,
    shaped_rewards,
)
from simlab.credit.health import HealthOptions, summary
from simlab.errors import ConfigError

BATCH = SegmentBatch.from_rollouts(
    [[3, 2], [4], [1, 1, 2], [5]],
    [1.0, 0.0, 1.0, 0.0],
    groups=[0, 0, 1, 1],
    values=[[np.full(3, 0.5), np.full(2, 0.4)], [np.full(4, 0.1)], [[0.2], [0.3], [0.4, 0.5]], [np.zeros(5)]],
    finished=[True, False, True, True],
)


def opts(name: str) -> dict:
    return {"gamma": 0.99, "lam": 0.95} if estimator_family(name) == "gae" else {}


@pytest.mark.parametrize("name", ESTIMATORS.names())
def test_estimator_contract(name):
    est = estimate(BATCH, name, **opts(name))
    for grid in (est.advantages, est.value_targets):
        if grid is None:
            assert est.family == "group"
            continue
        assert grid.shape == BATCH.shape
        assert grid.dtype == np.float64
        assert np.isfinite(grid).all()
        assert not grid[~BATCH.token_mask].any()  # padding is 0
    assert est.family == estimator_family(name)
    # the docstring states the equation and its source
    doc = ESTIMATORS.get(name).__doc__ or ""
    assert "=" in doc and ("eq." in doc or "Schulman" in doc or "GAE" in doc)


@pytest.mark.parametrize("name", ESTIMATORS.names())
def test_estimator_rejects_unknown_option(name):
    with pytest.raises(ConfigError, match="has no option 'bogus'"):
        advantages(BATCH, name, bogus=1, **opts(name))


@pytest.mark.parametrize("name", NORMALISERS.names())
@pytest.mark.parametrize("overlong_mask", [False, True])
def test_normaliser_contract(name, overlong_mask):
    w = loss_weights(BATCH, name, overlong_mask=overlong_mask)
    assert w.shape == BATCH.shape
    assert (w >= 0).all()
    assert not w[~BATCH.token_mask].any()
    if overlong_mask:
        assert not w[~BATCH.row_finished].any()
    assert "w = " in (NORMALISERS.get(name).__doc__ or "")


@pytest.mark.parametrize("row_weight", ROW_WEIGHTS.names())
@pytest.mark.parametrize("name", NORMALISERS.names())
@pytest.mark.parametrize("overlong_mask", [False, True])
def test_row_weight_contract(row_weight, name, overlong_mask):
    mask = BATCH.token_mask.copy()
    mask[0, 0] = False  # a token whose loss is masked, as a summary token under summary_loss='mask'
    for token_mask in (None, mask):
        w = loss_weights(BATCH, name, overlong_mask=overlong_mask, row_weight=row_weight, token_mask=token_mask)
        assert w.shape == BATCH.shape
        assert (w >= 0).all() and np.isfinite(w).all()
        assert not w[~BATCH.token_mask].any()
        if token_mask is not None:
            assert w[0, 0] == 0 and w[0, 1] > 0
        if overlong_mask:
            assert not w[~BATCH.row_finished].any()
    doc = ROW_WEIGHTS.get(row_weight).__doc__ or ""
    assert "c_j = " in doc and ("PR #7580" in doc or "default" in doc)


@pytest.mark.parametrize("baseline", BASELINES.names())
@pytest.mark.parametrize("name", [n for n in ESTIMATORS.names() if estimator_family(n) == "group"])
def test_baseline_contract(baseline, name):
    adv = advantages(BATCH, name, baseline=baseline)
    assert adv.shape == BATCH.shape and np.isfinite(adv).all()
    assert not adv[~BATCH.token_mask].any()
    assert "b_r = " in (BASELINES.get(baseline).__doc__ or "")


@pytest.mark.parametrize("cost", COSTS.names())
def test_cost_contract(cost):
    context = np.arange(1.0, BATCH.num_segments + 1.0)
    shaped = shaped_rewards(BATCH, cost, coef=0.1, row_context=context)
    assert shaped.shape == BATCH.rewards.shape and np.isfinite(shaped).all()
    assert (shaped <= BATCH.rewards).all()  # a cost never adds reward
    np.testing.assert_array_equal(shaped_rewards(BATCH, cost, coef=0.0, row_context=context), BATCH.rewards)
    assert "c_s = " in (COSTS.get(cost).__doc__ or "")


@pytest.mark.parametrize("reading", LAMBDA_READINGS.names())
def test_lambda_reading_contract(reading):
    lam_opts = {"lam": reading, "alpha": 1.5, "response_cap": 16}
    if reading != "response_cap":
        lam_opts.pop("response_cap")
    for name in ESTIMATORS.names():
        if estimator_family(name) == "gae":
            adv = advantages(BATCH, name, gamma=1.0, **lam_opts)
            assert np.isfinite(adv).all()
    health = summary(
        BATCH, HealthOptions(lam=reading, alpha=1.5, response_cap=16 if reading == "response_cap" else None)
    )
    assert 0 < health["lambda/min"] <= health["lambda/mean"] + 1e-12 <= 1 + 1e-12


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ConfigError, match="rollout_group") as err:
        advantages(BATCH, "grpo")
    assert "`estimator='grpo'` is invalid" in str(err.value)
    with pytest.raises(ConfigError, match="seq-mean-token-mean"):
        loss_weights(BATCH, "seq-mean")
    with pytest.raises(ConfigError, match="segment_length"):
        advantages(BATCH, "gae_concat", lam="tokens", alpha=1.5)


def test_health_summary_is_flat_floats():
    out = summary(BATCH, HealthOptions(normaliser="segment", overlong_mask=True))
    assert all(isinstance(v, float) for v in out.values())
    assert out["compaction_rate"] == 0.5
    assert out["segments/count_1"] == 2.0
