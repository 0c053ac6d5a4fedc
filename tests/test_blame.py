"""The nearest value a refused harness setting is offered (simlab.blame): the valid value closest to the bad
one, found without scanning every integer in between, and one that works when the run is resolved again."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.bench_blame import scan
from simlab.blame import NEAR, _nearest
from simlab.config import resolve
from simlab.errors import ConfigError


@given(st.integers(0, 5000), st.integers(0, 5000), st.integers(0, 6000), st.booleans())
def test_the_nearest_end_of_an_interval_is_the_one_a_full_scan_finds(value: int, low: int, width: int,
                                                                     below: bool) -> None:
    """Valid values form an interval that excludes the bad one (each window check is linear in one
    setting): where the interval lies within NEAR steps or is at least as wide as its distance from the
    value (a setting's valid values run to its bound), the search agrees with the scan; elsewhere what
    it offers still works."""
    if below:
        low = max(0, value - width - 1 - low % 50)
    high = low + width
    if low <= value <= high:
        return
    calls: list[int] = []

    def works(v: int) -> bool:
        calls.append(v)
        return low <= v <= high

    found = _nearest(value, works)
    searched = len(calls)
    distance = low - value if low > value else value - high
    if distance <= NEAR or width >= distance:
        assert found == scan(value, works, 12_000)
    elif found is not None:
        assert works(int(found.rsplit(" ", 1)[1]))
    assert searched <= 2 * NEAR + 4 * 27 + 13  # one by one, then each way a gallop (down: and halvings) and a bisection


def test_the_search_costs_a_few_configurations_however_far_the_fix() -> None:
    calls: list[int] = []

    def works(v: int) -> bool:
        calls.append(v)
        return v <= 861

    assert _nearest(100_000, works) == "choose an integer <= 861"
    assert len(calls) < 100


def test_no_valid_value_gives_no_fix_and_a_fix_that_is_given_works() -> None:
    assert _nearest(50, lambda v: False) is None
    odd_band = {v for v in range(30, 400) if v % 7 == 0}  # not an interval: the value offered still works
    said = _nearest(10, odd_band.__contains__)
    assert said is not None and int(said.rsplit(" ", 1)[1]) in odd_band


@pytest.mark.parametrize(
    ("nested", "key", "fix"),
    [
        # supo derives frac from the window: a summary of 5,000 tokens was offered nothing (its fix lay
        # beyond the 4,096 steps the old scan looked at)
        ({"harness": {"summary_tokens": 5000}}, "summary_tokens", "choose an integer <= 39"),
        ({"train": {"recipe": "grpo"}, "harness": {"max_compactions": 100_000}}, "max_compactions",
         "choose an integer <= 861"),
        ({"harness": {"window": 8}}, "window", "choose an integer >= 30"),
        # valid t_comp is [1, 27] here: a band that ends above 0, 33 steps below the value
        ({"train": {"recipe": "compactionrl"}, "harness": {"window": 48, "t_comp": 60}}, "t_comp",
         "choose an integer <= 27"),
    ],
)
def test_a_far_fix_is_offered_and_is_the_edge(nested: dict[str, Any], key: str, fix: str) -> None:
    with pytest.raises(ConfigError) as err:
        resolve(nested)
    assert str(err.value).endswith(fix), str(err.value)
    edge = int(fix.rsplit(" ", 1)[1])
    outside = edge + 1 if "<=" in fix else edge - 1
    harness = {**nested["harness"], key: edge}
    assert getattr(resolve({**nested, "harness": harness}).harness, key) == edge
    with pytest.raises(ConfigError):
        resolve({**nested, "harness": {**harness, key: outside}})
