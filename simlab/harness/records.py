"""What the harness returns: each segment as a training sample (:class:`SegmentTokens`), what happened in
each rollout (:class:`RolloutRecord`), and the batch of both with the credit layer's SegmentBatch
(:class:`RolloutBatch`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simlab.arrays import BoolArray, FloatArray, IntArray
from simlab.harness.config import HarnessConfig
from simlab.segments import SegmentBatch
from simlab.tasks import vocab


@dataclass(frozen=True)
class SegmentTokens:
    """One segment as a training sample: the tokens in order, and what each one is."""

    tokens: IntArray
    """(T,) every token of the segment: its starting context, then steps, then v_sum + summary."""
    optimised: BoolArray
    """(T,) True where the trained agent generated the token in this segment (the loss mask)."""
    phase: NDArray[np.int8]
    """(T,) ``Phase`` of each token (CONTEXT for everything not generated here)."""
    logprobs: FloatArray
    """(T,) the agent's log-probability of each generated token; NaN where none was given."""
    values: FloatArray
    """(T,) the agent's value at each generated token; NaN where none was given."""

    @property
    def num_optimised(self) -> int:
        """Tokens of the segment the policy generated (the ones the update optimises)."""
        return int(self.optimised.sum())


@dataclass(frozen=True)
class RolloutRecord:
    """What happened in one rollout."""

    reward: float
    finished: bool
    """Produced an answer (False: overlong), or ended on a cut summary read as a failure
    (``harness.cut_summary='fail'``: finished, reward 0)."""
    overlong: str
    """'' if answered, else why it stopped: 'steps' (H), 'compactions' (S), 'window' (no longer fits W),
    'truncated' (the env truncated it) or 'summary' (a summary cut at its budget, ``harness.cut_summary``)."""
    steps: int
    """Env steps taken, the answer included."""
    compactions: int
    """Compactions (summaries or slides) performed."""
    tokens: int
    """Tokens written into its contexts (generated and observed), prompt and rebuilds excluded."""
    segment_rows: tuple[int, int]
    """[start, stop) rows of this rollout in ``RolloutBatch.segments`` and the SegmentBatch."""
    segment_optimised: tuple[int, ...]
    """Optimised tokens of each of its segments, in order (the SegmentBatch's counts)."""
    n_after: tuple[int, ...]
    """N_after of each of its segments: optimised tokens generated after it in this rollout."""
    context_lengths: IntArray
    """Working context (conditioning + generated tokens) at every generation, in order."""
    step_context: IntArray
    """Context length right after each env step (before any compaction)."""
    summaries: int = 0
    """Summaries written for it (by the agent or a frozen summariser)."""
    summary_holds: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """Of those, by each key the task's summary probe reports (:data:`simlab.names.SUMMARY_HOLDS`): how many
    summaries it applied to and how many held it (``answer``: the episode's answer token, a ground-truth check
    of summary quality; ``all_facts``: every stated fact; ``cued``/``uncued``: with a cue, the fact it names,
    another fact). Empty for an env without a probe."""
    summaries_cut: int = 0
    """Of those, how many reached ``harness.summary_budget`` without their end token (cut at the cap)."""
    summary_lengths: tuple[int, ...] = ()
    """Tokens each summary left in the next segment, in order (a variable-length summary's end token
    excluded)."""
    context_before: tuple[int, ...] = ()
    """Working context when each compaction that opened a next segment began (what the trigger read), in order."""
    context_after: tuple[int, ...] = ()
    """Context each of those next segments opened with (prompt, summary block, kept tail), in order."""

    def summaries_holding(self, key: str) -> tuple[int, int]:
        """(summaries the probe's ``key`` applied to, summaries holding it); (0, 0) where it never applied."""
        return self.summary_holds.get(key, (0, 0))


@dataclass(frozen=True)
class RolloutBatch:
    """The harness's output: the credit layer's SegmentBatch plus the token arrays training needs."""

    batch: SegmentBatch
    segments: list[SegmentTokens]
    """Aligned with the rows of ``batch``."""
    rollouts: list[RolloutRecord]
    config: HarnessConfig
    v_sum_version: str
    env_seconds: float
    agent_seconds: float
    total_seconds: float

    @property
    def harness_seconds(self) -> float:
        """Seconds spent in the harness itself: the total less the env's and the agents' time."""
        return self.total_seconds - self.env_seconds - self.agent_seconds

    def padded(self) -> dict[str, NDArray[Any]]:
        """Segments as right-padded (S, T_max) arrays: tokens, attention_mask, optimised_mask, phase,
        logprobs. Batch-first; masks are 1 where the entry counts."""
        width = max(s.tokens.size for s in self.segments)
        n = len(self.segments)
        out: dict[str, NDArray[Any]] = {
            "tokens": np.full((n, width), vocab.PAD, dtype=np.int64),
            "attention_mask": np.zeros((n, width), dtype=np.bool_),
            "optimised_mask": np.zeros((n, width), dtype=np.bool_),
            "phase": np.zeros((n, width), dtype=np.int8),
            "logprobs": np.full((n, width), np.nan),
        }
        for r, s in enumerate(self.segments):
            t = s.tokens.size
            out["tokens"][r, :t] = s.tokens
            out["attention_mask"][r, :t] = True
            out["optimised_mask"][r, :t] = s.optimised
            out["phase"][r, :t] = s.phase
            out["logprobs"][r, :t] = s.logprobs
        return out
