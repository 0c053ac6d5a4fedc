"""Hypothesis strategies for random segmented batches."""

from __future__ import annotations

from hypothesis import strategies as st

from simlab import SegmentBatch

rewards_st = st.floats(min_value=-2.0, max_value=2.0, allow_nan=False, allow_infinity=False)
values_st = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False, allow_infinity=False)


@st.composite
def rollouts(
    draw, max_rollouts: int = 8, max_segments: int = 4, max_tokens: int = 7, with_values: bool = True
):
    """Keyword arguments for SegmentBatch.from_rollouts."""
    n = draw(st.integers(1, max_rollouts))
    seg = [draw(st.lists(st.integers(1, max_tokens), min_size=1, max_size=max_segments)) for _ in range(n)]
    kwargs = {
        "segment_tokens": seg,
        "rewards": [draw(rewards_st) for _ in range(n)],
        "groups": [draw(st.integers(0, 2)) for _ in range(n)],
        "finished": [draw(st.booleans()) for _ in range(n)],
    }
    if with_values:
        kwargs["values"] = [[[draw(values_st) for _ in range(k)] for k in segs] for segs in seg]
    return kwargs


@st.composite
def batches(draw, **kw):
    return SegmentBatch.from_rollouts(**draw(rollouts(**kw)))
