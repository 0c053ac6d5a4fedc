"""Outcome statistics: final success, the area under the evaluation curve, and steps to a threshold."""

from __future__ import annotations

import polars as pl
import pytest

from simlab.analysis.statistics import outcomes
from simlab.errors import ConfigError


def test_auc_and_steps_to_by_hand() -> None:
    # trapezoids over steps 0, 2, 6: (0 + 50) / 2 * 2 + (50 + 100) / 2 * 4 = 50 + 300 = 350, over 6 steps
    assert outcomes.auc([0, 2, 6], [0, 50, 100]) == pytest.approx(350 / 6)
    assert outcomes.steps_to([0, 2, 6], [0, 50, 100], 50) == (2.0, False)
    assert outcomes.steps_to([0, 2, 6], [0, 50, 60], 70) == (6.0, True)  # never reached: censored at the end


def test_auc_of_one_evaluation_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"`statistic='auc'` is invalid.*has 1"):
        outcomes.auc([10], [50.0])


def _history() -> pl.DataFrame:
    rows = [("a", 0, 0.2), ("a", 2, 0.4), ("a", 4, 0.6), ("b", 0, 0.2), ("b", 4, 0.3)]
    return pl.DataFrame(rows, schema={"run_id": pl.String, "step": pl.Int64, "value": pl.Float64},
                        orient="row").with_columns(pl.lit("eval/compacted/success").alias("key"))


def test_run_outcomes_read_each_runs_curve() -> None:
    h = _history()
    final = dict(outcomes.run_outcomes(h, "eval/compacted/success", "final").select("run_id", "value").iter_rows())
    assert final == pytest.approx({"a": 60.0, "b": 30.0})
    auc = dict(outcomes.run_outcomes(h, "eval/compacted/success", "auc").select("run_id", "value").iter_rows())
    assert auc == pytest.approx({"a": 40.0, "b": 25.0})
    got = outcomes.run_outcomes(h, "eval/compacted/success", "steps_to", threshold=40.0)
    assert got.rows() == [("a", 2.0, False), ("b", 4.0, True)]
    with pytest.raises(ConfigError, match="threshold"):
        outcomes.run_outcomes(h, "eval/compacted/success", "steps_to")


def test_episode_outcomes_per_instance() -> None:
    # run a: instances 1-2 at every step (the curve subset), instance 3 only at the final, full evaluation
    e = pl.DataFrame({
        "run_id": ["a"] * 7, "step": [0, 0, 2, 2, 4, 4, 4], "evaluation": ["compacted"] * 7,
        "instance": [1, 2, 1, 2, 1, 2, 3], "success": [0, 1, 1, 1, 1, 0, 1],
    })
    final = outcomes.episode_outcomes(e, "compacted", "final")
    assert final is not None and final.sort("instance").get_column("value").to_list() == [100.0, 0.0, 100.0]
    auc = outcomes.episode_outcomes(e, "compacted", "auc")
    assert auc is not None and auc.get_column("instance").to_list() == [1, 2]  # instance 3 has no curve
    assert auc.get_column("value").to_list() == pytest.approx([75.0, 75.0])
    assert outcomes.episode_outcomes(e, "compacted", "steps_to") is None
    with pytest.raises(ConfigError, match="auc"):
        outcomes.episode_outcomes(e.filter(pl.col("step") == 4), "compacted", "auc")


def test_gain_by_hand_per_run_and_per_instance() -> None:
    h = _history()  # a: 20 -> 60, b: 20 -> 30
    gain = dict(outcomes.run_outcomes(h, "eval/compacted/success", "gain").select("run_id", "value").iter_rows())
    assert gain == pytest.approx({"a": 40.0, "b": 10.0})
    e = pl.DataFrame({  # instance 3 is evaluated only at the end: no step-0 value to pair it with
        "run_id": ["a"] * 7, "step": [0, 0, 2, 2, 4, 4, 4], "evaluation": ["compacted"] * 7,
        "instance": [1, 2, 1, 2, 1, 2, 3], "success": [0, 1, 1, 1, 1, 0, 1],
    })
    per = outcomes.episode_outcomes(e, "compacted", "gain")
    assert per is not None and per.rows() == [("a", 1, 100.0), ("a", 2, -100.0)]


def test_gain_mean_over_paired_instances_equals_the_curve_difference() -> None:
    """Property: on instances evaluated at both ends, the mean per-instance gain is the difference of the
    two evaluations' means (what run_outcomes reads off the logged curve)."""
    import numpy as np

    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(2, 30))
        y0, y1 = rng.integers(0, 2, n), rng.integers(0, 2, n)
        e = pl.DataFrame({"run_id": ["r"] * 2 * n, "step": [0] * n + [7] * n, "evaluation": ["compacted"] * 2 * n,
                          "instance": list(range(n)) * 2, "success": [*y0, *y1]})
        per = outcomes.episode_outcomes(e, "compacted", "gain")
        assert per is not None
        assert per.get_column("value").mean() == pytest.approx(100.0 * (y1.mean() - y0.mean()))


def test_gain_of_one_evaluation_is_refused() -> None:
    one = _history().filter(pl.col("step") == 4)
    with pytest.raises(ConfigError, match=r"`statistic='gain'` is invalid.*has 1"):
        outcomes.run_outcomes(one, "eval/compacted/success", "gain")
