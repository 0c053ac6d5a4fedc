"""The route model's expected gradients: a hand-computed case and the segment normaliser's sign flip."""

from __future__ import annotations

import pytest

from simlab.analysis.replication.predict import Choice, Kind, RouteModel, expected_gradient


def test_two_deterministic_routes_by_hand() -> None:
    # G = 2, READ always wins, PEEK always loses, pi = 1/2: half the groups split, with advantages +-1 (std
    # normalised); each split group gives w (0.5 + 0.5) on the READ logit, w = 1 / (2 P T) under the token
    # normaliser. E[g_READ] = (P / 2) / (2 P T) = 1 / (4 T) = 0.025 at T = 10 tokens per rollout.
    model = RouteModel({"READ": (Kind(1.0, (10,), 1.0),), "PEEK": (Kind(1.0, (10,), 0.0),)})
    g = expected_gradient(model, Choice(), {"READ": 0.5, "PEEK": 0.5}, group_size=2, prompts=64, batches=400)
    assert g["READ"] == pytest.approx(0.025, rel=0.05)
    assert g["PEEK"] == pytest.approx(-0.025, rel=0.05)


def _routes(c: float) -> RouteModel:
    """READ pays 0.9 but half its rollouts burst into three segments, the decision in a 3-token first one,
    and a burst loses the fact with probability c; PEEK pays 0.6 in one segment."""
    return RouteModel({"READ": (Kind(0.5, (3, 20, 20), 0.9 * (1 - c)), Kind(0.5, (14,), 0.9)),
                       "PEEK": (Kind(1.0, (10,), 0.6),)})


def test_the_segment_normaliser_flips_where_the_token_normaliser_does_not() -> None:
    model = _routes(0.5)
    assert model.mean_success("READ") > model.mean_success("PEEK")  # 0.675 against 0.6: READ is better
    half = {"READ": 0.5, "PEEK": 0.5}
    token = expected_gradient(model, Choice(normaliser="token"), half, batches=100)
    segment = expected_gradient(model, Choice(normaliser="segment"), half, batches=100)
    assert token["READ"] > 0 > segment["READ"]


def test_without_coupling_both_normalisers_agree_in_sign() -> None:
    half = {"READ": 0.5, "PEEK": 0.5}
    token = expected_gradient(_routes(0.0), Choice(normaliser="token"), half, batches=50)
    segment = expected_gradient(_routes(0.0), Choice(normaliser="segment"), half, batches=50)
    assert token["READ"] > 0 and segment["READ"] > 0


def test_route_probabilities_are_checked() -> None:
    with pytest.raises(ValueError, match=r"sum to 0\.9"):
        RouteModel({"READ": (Kind(0.9, (4,), 1.0),)})
