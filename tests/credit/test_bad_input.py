"""Bad input raises ValueError naming the argument and what was wrong; nothing is broadcast or clipped."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simlab import SegmentBatch, advantages, loss_weights
from simlab.errors import ConfigError

OK = {"segment_tokens": [[2, 1], [3]], "rewards": [1.0, 0.0]}
VALUES = [[np.zeros(2), np.zeros(1)], [np.zeros(3)]]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rewards": [1.0]}, "rewards has 1 entries but segment_tokens has 2"),
        ({"groups": [0]}, "groups has 1 entries"),
        ({"finished": [True, False, True]}, "finished has 3 entries"),
        ({"values": VALUES[:1]}, "values has 1 entries"),
        ({"values": [[np.zeros(2)], [np.zeros(3)]]}, r"values\[0\] has 1 segments"),
        ({"values": [[np.zeros(3), np.zeros(1)], [np.zeros(3)]]}, r"values\[0\]\[0\] has shape \(3,\)"),
        ({"segment_tokens": [[2, 0], [3]]}, r"segment_tokens\[0\]\[1\]=0 is invalid"),
        ({"segment_tokens": [[2, -4], [3]]}, r"segment_tokens\[0\]\[1\]=-4 is invalid"),
        ({"segment_tokens": [[2, 1.5], [3]]}, r"segment_tokens\[0\]\[1\]=1.5 is invalid"),
        ({"segment_tokens": [[], [3]]}, r"segment_tokens\[0\] is empty"),
        ({"segment_tokens": []}, "segment_tokens is empty"),
        ({"rewards": [math.nan, 0.0]}, r"rewards\[0\]=nan is invalid"),
        ({"rewards": [1.0, math.inf]}, r"rewards\[1\]=inf is invalid"),
        ({"values": [[np.zeros(2), [np.nan]], [np.zeros(3)]]}, r"values\[0\]\[1\]\[0\]=nan is invalid"),
        ({"values": [[np.zeros(2), np.zeros(1)], [[0.0, -np.inf, 0.0]]]}, r"values\[1\]\[0\]\[1\]=-inf"),
        ({"finished": [True, 1]}, r"finished\[1\]=1 is invalid"),
        ({"groups": [[0], 1]}, r"groups\[0\]=\[0\] is invalid"),
    ],
)
def test_from_rollouts_rejects(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SegmentBatch.from_rollouts(**{**OK, **kwargs})


BATCH = SegmentBatch.from_rollouts(**OK, values=VALUES)


@pytest.mark.parametrize(
    ("name", "kwargs", "match"),
    [
        ("gae_concat", {"lam": 0.0}, r"`lam=0.0` is invalid; choose a value in \(0, 1\] or one of 'response_cap'"),
        ("gae_concat", {"lam": 1.2}, r"`lam=1.2` is invalid"),
        ("gae_segment_local", {"gamma": 0.0}, r"`gamma=0.0` is invalid; choose a value in \(0, 1\]"),
        ("gae_segment_local", {"gamma": 1.01}, r"`gamma=1.01` is invalid"),
        ("gae_compaction", {"lam": "segment_length", "alpha": 0.0}, r"`alpha=0.0` is invalid"),
        ("gae_compaction", {"lam": "segment_length", "alpha": -1.0}, r"`alpha=-1.0` is invalid"),
        ("gae_compaction", {"lam": "segment_length"}, "needs alpha"),
        ("gae_compaction", {"lam": "segment_length", "alpha": 0.5}, r"lambda must lie in \(0, 1\]"),
        ("gae_compaction", {"lam": "response_cap", "alpha": 1.5}, "needs response_cap"),
        ("gae_compaction", {"lam": 0.9, "alpha": 1.5}, "only apply to a length-adaptive lam"),
        ("rollout_group", {"eps": -1.0}, r"`eps=-1.0` is invalid"),
        ("nope", {}, r"`estimator='nope'` is invalid; choose one of 'rollout_group'"),
    ],
)
def test_estimator_options_rejected(name, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        advantages(BATCH, name, **kwargs)


@pytest.mark.parametrize("name", ["gae_concat", "gae_segment_local", "gae_compaction"])
def test_gae_without_values(name):
    batch = SegmentBatch.from_rollouts(**OK)
    with pytest.raises(ValueError, match=f"{name} needs critic values"):
        advantages(batch, name)


@pytest.mark.parametrize(
    ("name", "kwargs", "match"),
    [
        ("tokens", {}, r"`normaliser='tokens'` is invalid"),
        (
            "constant",
            {"max_tokens": 2},
            r"`max_tokens=2` is invalid; use an integer >= the longest segment \(3",
        ),
        ("token", {"overlong_mask": "yes"}, r"`overlong_mask='yes'` is invalid"),
    ],
)
def test_normaliser_options_rejected(name, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        loss_weights(BATCH, name, **kwargs)


@pytest.mark.parametrize("multiple", [0, -2, 1.5, True])
def test_pad_to_rejects(multiple):
    with pytest.raises(ConfigError, match=f"`multiple={multiple!r}` is invalid"):
        BATCH.pad_to(multiple)


def test_with_values_equals_from_rollouts_and_checks_its_grid():
    plain = SegmentBatch.from_rollouts(**OK)
    grid = np.zeros(plain.shape)
    grid[plain.token_mask] = np.arange(1.0, 7.0)
    per_segment = [[grid[0, :2], grid[1, :1]], [grid[2, :3]]]
    np.testing.assert_array_equal(plain.with_values(grid).values,
                                  SegmentBatch.from_rollouts(**OK, values=per_segment).values)
    with pytest.raises(ValueError, match=r"values has shape \(2, 3\)"):
        plain.with_values(np.zeros((2, 3)))
    bad = grid.copy()
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match=r"values\[1, 0\]=nan is invalid"):
        plain.with_values(bad)
    bad = grid.copy()
    bad[1, 2] = 1.0
    with pytest.raises(ValueError, match="must be 0 on padding"):
        plain.with_values(bad)
