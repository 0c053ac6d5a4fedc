"""The clipped policy loss and the critic loss, by hand and against a plain-loop twin."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from simlab.errors import ConfigError
from simlab.update import clipped_policy_loss, explained_variance, value_loss


def test_hand_computed_clip_higher():
    # ratios 1.5 (A>0, clipped at 1.28), 0.5 (A<0, clipped at 0.8), 1.1 (inside), 0.7 (A>0, unclipped min)
    ratio = torch.tensor([[1.5, 0.5, 1.1, 0.7]], dtype=torch.float64)
    adv = torch.tensor([[1.0, -2.0, 3.0, 1.0]], dtype=torch.float64)
    w = torch.full((1, 4), 0.25, dtype=torch.float64)
    loss, stats = clipped_policy_loss(
        torch.log(ratio), torch.zeros_like(ratio), adv, w, eps_low=0.2, eps_high=0.28
    )
    # per-token: -min(1.5, 1.28)=-1.28; -min(-1.0, -1.6)=1.6; -3.3; -min(0.7, 0.8)=-0.7
    assert float(loss) == pytest.approx(0.25 * (-1.28 + 1.6 - 3.3 - 0.7))
    assert stats.clip_fraction == pytest.approx(0.5)


def test_zero_weight_tokens_get_no_gradient():
    logp = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]], dtype=torch.float64)
    loss, _ = clipped_policy_loss(
        logp, torch.zeros(2, 3, dtype=torch.float64), torch.ones(2, 3, dtype=torch.float64), w
    )
    loss.backward()
    assert logp.grad is not None
    assert (logp.grad[w == 0] == 0).all()
    assert (logp.grad[w > 0] < 0).all()


@settings(max_examples=50, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.floats(-1.0, 1.0), st.floats(-1.0, 1.0), st.floats(-3.0, 3.0), st.floats(0.0, 1.0)),
        min_size=1,
        max_size=12,
    ),
    eps_low=st.floats(0.05, 0.5),
    eps_high=st.floats(0.05, 0.5),
)
def test_matches_plain_loop(data, eps_low, eps_high):
    logp, old, adv, w = (torch.tensor([[row[i] for row in data]], dtype=torch.float64) for i in range(4))
    loss, _ = clipped_policy_loss(logp, old, adv, w, eps_low=eps_low, eps_high=eps_high)
    expected = 0.0
    for lp, lo, a, wt in data:
        r = math.exp(lp - lo)
        expected += wt * -min(r * a, min(max(r, 1 - eps_low), 1 + eps_high) * a)
    assert float(loss) == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("name", "kw"), [("eps_low", {"eps_low": 0.0}), ("eps_high", {"eps_high": -0.1})])
def test_bad_clip_ranges(name, kw):
    t = torch.zeros(1, 2)
    with pytest.raises(ConfigError, match=f"`{name}="):
        clipped_policy_loss(t, t, t, t, **kw)


def test_value_loss_and_explained_variance():
    v = torch.tensor([[1.0, 2.0, 0.0]])
    t = torch.tensor([[1.5, 2.0, 9.0]])
    w = torch.tensor([[0.5, 0.5, 0.0]])
    assert float(value_loss(v, t, w)) == pytest.approx(0.5 * 0.5 * 0.25)
    mask = torch.tensor([[1, 1, 0]])
    assert explained_variance(t, t, mask) == pytest.approx(1.0)
    assert explained_variance(
        torch.tensor([[1.0, 2.0, 0.0]]), torch.tensor([[1.0, 3.0, 0.0]]), mask
    ) == pytest.approx(0.75)
