"""A trainer's rows read as simlab's rollouts, and simlab's credit written back onto them.

A trainer that hands a compacted rollout to the update as several rows (verl's v1 trainer) keys each row
``{uid}_{session_id}_{index}``: the prompt group, the rollout (a session) and the segment's position in
it. Each row holds its generated tokens where its ``response_mask`` is 1, with tool or environment
tokens (0) between them. :func:`read_rows` turns such rows into a :class:`~simlab.segments.SegmentBatch`
(a rollout per session, a segment per row that generated a token, the generated tokens in order) and
keeps where each came from, so that :meth:`Rows.to_trainer` writes any simlab grid back onto the
trainer's ``(rows, response length)`` grid, on the masked positions only.

Rules of the reading, each one verl's where verl has one:

- a rollout's reward is its final row's (the highest index), summed over the row's tokens, as verl's
  session path scores a session (``compute_advantage_for_multi_trajectories``); so is its finished flag;
- a row with no generated token is no segment (it has nothing to credit); a session with none at all is
  no rollout, and leaves the group's baseline (verl's grpo keeps its reward in the group's mean and std);
- a session whose final row has no generated token keeps its other rows' credit here; verl's session
  path gives the whole session 0 (it reads the advantage at the final row's first masked position).

Pure numpy: no trainer, no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simlab.arrays import BoolArray, FloatArray, IntArray
from simlab.credit.estimators import estimate
from simlab.credit.normalisers import ROW_WEIGHTS, counted_tokens
from simlab.errors import RowsError
from simlab.segments import SegmentBatch

KEY_FORMAT = "{uid}_{session_id}_{index}"
"""How verl's v1 trainer keys a row (``verl/trainer/ppo/v1/agent_loop_tq.py``)."""


@dataclass(frozen=True, eq=False)
class Rows:
    """A trainer's rows as a :class:`SegmentBatch`, with the map between the two grids."""

    batch: SegmentBatch
    """The rollouts: a segment per row that generated a token, sessions in order of first appearance."""
    source: IntArray
    """(S,) the trainer row of each segment row."""
    mask: BoolArray
    """(B, T) the trainer's response mask: True on generated tokens."""
    session: IntArray
    """(B,) the rollout of each trainer row; -1 where the session was left out (no generated token)."""

    @property
    def num_rows(self) -> int:
        """B, the trainer's rows."""
        return int(self.mask.shape[0])

    def _positions(self) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """(trainer row, column, segment row, token) of every generated token, row-major."""
        b, t = np.nonzero(self.mask)
        segment_of = np.full(self.num_rows, -1, dtype=np.int64)
        segment_of[self.source] = np.arange(self.source.size)
        starts = np.cumsum(self.mask.sum(axis=1)) - self.mask.sum(axis=1)
        return b, t, segment_of[b], np.arange(b.size) - starts[b]

    def to_trainer(self, grid: FloatArray) -> FloatArray:
        """(S, max_tokens) simlab grid -> (B, T) trainer grid: token k of a segment on its row's k-th
        masked position; 0 elsewhere."""
        b, t, s, k = self._positions()
        out = np.zeros(self.mask.shape, dtype=np.float64)
        out[b, t] = np.asarray(grid, dtype=np.float64)[s, k]
        return out

    def from_trainer(self, grid: Any) -> FloatArray:
        """(B, T) trainer grid -> (S, max_tokens) simlab grid (its masked positions, in order; 0 on padding)."""
        b, t, s, k = self._positions()
        out = np.zeros(self.batch.shape, dtype=np.float64)
        out[s, k] = np.asarray(grid, dtype=np.float64)[b, t]
        return out


def split_key(key: Any, where: str) -> tuple[str, str, int]:
    """(uid, session_id, index) of a row key; ``where`` names it in the error (``keys[3]``)."""
    parts = key.rsplit("_", 2) if isinstance(key, str) else []
    if len(parts) != 3 or not parts[2].isdigit() or not parts[0]:
        raise RowsError.invalid(where, key, f"use verl's row key {KEY_FORMAT} (index a non-negative integer)")
    return parts[0], parts[1], int(parts[2])


def _grid(name: str, value: Any, rows: int | None = None) -> FloatArray:
    """A finite (B, T) float grid (``rows`` rows when given)."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != 2 or (rows is not None and arr.shape[0] != rows):
        want = f"({rows}, response length)" if rows is not None else "(rows, response length)"
        raise RowsError.invalid(f"{name}.shape", arr.shape, f"give a {want} grid")
    _finite(name, arr)
    return arr


def _finite(name: str, arr: FloatArray) -> None:
    """``RowsError`` at the first NaN or infinity of ``arr``, naming its position."""
    bad = np.argwhere(~np.isfinite(arr))
    if bad.size:
        where = ", ".join(str(int(i)) for i in bad[0])
        raise RowsError.invalid(f"{name}[{where}]", float(arr[tuple(bad[0])]), "every entry must be finite")


def _mask(response_mask: Any) -> BoolArray:
    mask = _grid("response_mask", response_mask)
    bad = np.argwhere((mask != 0) & (mask != 1))
    if bad.size:
        i, j = (int(x) for x in bad[0])
        raise RowsError.invalid(f"response_mask[{i}, {j}]", float(mask[i, j]), "use 0 or 1")
    return mask.astype(np.bool_)


def _scores(rewards: Any, shape: tuple[int, int]) -> FloatArray:
    """(B,) each row's reward: a (B,) vector as given, a (B, T) grid summed over the row (as verl sums
    ``token_level_rewards``)."""
    arr = np.asarray(rewards, dtype=np.float64)
    if arr.ndim == 2:
        summed: FloatArray = _grid("rewards", arr, shape[0]).sum(axis=1)
        return summed
    if arr.shape != (shape[0],):
        raise RowsError.invalid("rewards.shape", arr.shape, f"give ({shape[0]},) per row or {shape} per token")
    _finite("rewards", arr)
    return arr


def _flags(finished: Any, rows: int) -> BoolArray:
    arr = np.asarray(finished)
    if arr.shape != (rows,) or arr.dtype != np.bool_:
        raise RowsError.invalid("finished", f"{arr.dtype} of shape {arr.shape}", f"give ({rows},) True/False per row")
    return arr


def _sessions(keys: Sequence[Any], rows: int) -> tuple[list[str], list[list[int]]]:
    """(the group of each session, each session's trainer rows by index), sessions in order of first
    appearance."""
    if len(keys) != rows:
        raise RowsError.invalid("len(keys)", len(keys), f"give one key per row ({rows} rows)")
    order: dict[tuple[str, str], list[tuple[int, int]]] = {}
    seen: set[str] = set()
    for b, key in enumerate(keys):
        uid, session_id, index = split_key(key, f"keys[{b}]")
        if key in seen:
            raise RowsError.invalid(f"keys[{b}]", key, "each row key must appear once")
        seen.add(key)
        order.setdefault((uid, session_id), []).append((index, b))
    return [uid for uid, _ in order], [[b for _, b in sorted(members)] for members in order.values()]


def read_rows(
    keys: Sequence[Any],
    response_mask: Any,
    rewards: Any,
    *,
    values: Any = None,
    finished: Any = None,
) -> Rows:
    """A trainer's rows as rollouts.

    Args:
        keys: (B,) row keys ``{uid}_{session_id}_{index}``.
        response_mask: (B, T) 1 on generated tokens, 0 on tool tokens and padding.
        rewards: (B, T) token rewards (a row's reward is their sum) or (B,) one per row.
        values: (B, T) critic values, read on the masked positions; needed by the GAE family.
        finished: (B,) True where the rollout produced a final answer; a session's flag is its final row's.

    Raises:
        RowsError: naming the argument, the bad value and what is allowed.
    """
    mask = _mask(response_mask)
    scores = _scores(rewards, mask.shape)
    flags = None if finished is None else _flags(finished, mask.shape[0])
    groups, sessions = _sessions(keys, mask.shape[0])
    tokens = mask.sum(axis=1)
    kept = [(g, members) for g, members in zip(groups, sessions, strict=True) if tokens[members].any()]
    if not kept:
        raise RowsError.invalid("response_mask", "all 0", "a batch needs at least one generated token")
    session = np.full(mask.shape[0], -1, dtype=np.int64)
    for r, (_, members) in enumerate(kept):
        session[members] = r
    source = np.asarray([b for _, members in kept for b in members if tokens[b] > 0], dtype=np.int64)
    batch = SegmentBatch.from_rollouts(
        [[int(tokens[b]) for b in members if tokens[b] > 0] for _, members in kept],
        [float(scores[members[-1]]) for _, members in kept],
        groups=[g for g, _ in kept],
        finished=None if flags is None else [bool(flags[members[-1]]) for _, members in kept],
    )
    rows = Rows(batch=batch, source=source, mask=mask, session=session)
    if values is None:
        return rows
    return replace(rows, batch=batch.with_values(rows.from_trainer(_grid("values", values, mask.shape[0]))))


def row_weight(rows: Rows, name: str) -> FloatArray:
    """(S,) the per-row weight c_j of ``name`` (``simlab.credit.ROW_WEIGHTS``) on the rows' segments."""
    batch = rows.batch
    return ROW_WEIGHTS.get(name, "row_weight")(batch, counted_tokens(batch))


def credit(
    rows: Rows, estimator: str, *, row_weight_name: str = "none", **options: Any
) -> tuple[FloatArray, FloatArray]:
    """((B, T) advantages, (B, T) returns) from simlab's estimator ``estimator`` with ``options``.

    The row weight rides in the advantages (A_j * c_j): a loss linear in the advantage then weighs row j
    by c_j under every aggregation mode. Returns are the GAE family's value targets (not weighted), and
    the weighted advantages for the group family, as verl's group estimators return them.
    """
    est = estimate(rows.batch, estimator, **options)
    adv = est.advantages * row_weight(rows, row_weight_name)[:, None]
    targets = adv if est.value_targets is None else est.value_targets
    return rows.to_trainer(adv), rows.to_trainer(targets)
