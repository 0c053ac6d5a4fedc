"""Each estimator's family is registered with it, and agrees with what the estimator returns."""

from __future__ import annotations

from simlab import SegmentBatch
from simlab.credit import ESTIMATORS, estimate, estimator_family, estimators_of


def test_the_families_partition_the_registry() -> None:
    assert estimators_of("group") == ["rollout_group", "trajectory_group"]
    assert estimators_of("gae") == ["gae_concat", "gae_segment_local", "gae_compaction"]
    assert sorted(estimators_of("group") + estimators_of("gae")) == sorted(ESTIMATORS.names())


def test_the_registered_family_is_the_one_each_estimate_reports() -> None:
    batch = SegmentBatch.from_rollouts([[3, 2], [4]], [1.0, 0.0], groups=[0, 0],
                                       values=[[[0.5] * 3, [0.5] * 2], [[0.5] * 4]])
    for name in ESTIMATORS.names():
        options = {"lam": 0.95} if estimator_family(name) == "gae" else {}
        assert estimate(batch, name, **options).family == estimator_family(name), name
