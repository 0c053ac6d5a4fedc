"""Each estimator's family is registered with it (tests/credit/test_contract.py checks that each estimate
reports the same family)."""

from __future__ import annotations

from simlab.credit import ESTIMATORS, estimators_of


def test_the_families_partition_the_registry() -> None:
    assert estimators_of("group") == ["rollout_group", "trajectory_group"]
    assert estimators_of("gae") == ["gae_concat", "gae_segment_local", "gae_compaction"]
    assert sorted(estimators_of("group") + estimators_of("gae")) == sorted(ESTIMATORS.names())

