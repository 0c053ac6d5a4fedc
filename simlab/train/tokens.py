"""The rollout batch as token tensors: right-padded (S, T) rows, the mini-batches an update cuts them into,
the maps between the credit layer's (S, max_optimised) grids and the (S, T) token grid, and scoring.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from simlab.credit import SegmentBatch
from simlab.errors import TrainingDiverged
from simlab.harness import RolloutBatch
from simlab.harness.protocol import Phase
from simlab.policy.decode import TokenScores, score_tokens
from simlab.policy.model import Policy


@dataclass
class TokenBatch:
    """A rollout batch as right-padded (S, T) tensors aligned with the harness's segment rows."""

    tokens: Tensor
    optimised: Tensor
    phase: Tensor
    lengths: Tensor
    """(S,) tokens of each row before its padding."""

    @classmethod
    def from_rollouts(cls, rb: RolloutBatch, device: torch.device) -> TokenBatch:
        """The batch's padded rows on ``device`` (lengths stay on the CPU)."""
        arrays = rb.padded()
        return cls(
            tokens=torch.from_numpy(arrays["tokens"]).to(device),
            optimised=torch.from_numpy(arrays["optimised_mask"]).to(device),
            phase=torch.from_numpy(arrays["phase"].astype(np.int64)).to(device),
            lengths=torch.from_numpy(arrays["attention_mask"].sum(axis=1)),
        )

    def pad_rows(self, rows: int) -> TokenBatch:
        """Append dummy rows (one PAD token, nothing optimised) up to ``rows`` rows."""
        extra = rows - self.tokens.shape[0]
        if extra <= 0:
            return self
        T = self.tokens.shape[1]
        z = torch.zeros(extra, T, dtype=self.tokens.dtype, device=self.tokens.device)
        return TokenBatch(torch.cat([self.tokens, z]), torch.cat([self.optimised, z.bool()]),
                          torch.cat([self.phase, z]), torch.cat([self.lengths, torch.ones(extra, dtype=torch.long)]))

    def take(self, mb: MiniBatch) -> TokenBatch:
        """The rows of ``mb``, cut to its width."""
        return TokenBatch(mb.of(self.tokens), mb.of(self.optimised), mb.of(self.phase), self.lengths[mb.rows])


@dataclass(frozen=True)
class MiniBatch:
    """Some rows of a :class:`TokenBatch`, cut to ``width`` positions (the longest of those rows)."""

    rows: Tensor
    """(R,) row indices into the batch."""
    width: int

    def of(self, grid: Tensor) -> Tensor:
        """The (R, width) part of a batch-shaped (S, T) grid: a copy, so writing to it changes nothing."""
        return grid[self.rows, : self.width]


def length_buckets(lengths: Tensor, *, max_rows: int, max_tokens: int) -> list[MiniBatch]:
    """Mini-batches of rows of similar length, each at most ``max_rows`` rows and, unless
    ``max_tokens`` is 0, at most ``max_tokens`` token slots (rows x the longest of them).

    Rows go shortest first and fill a mini-batch until the next would break a bound, so a
    mini-batch's padding is only the spread of lengths inside it. A batch that fits in one
    mini-batch keeps its rows in order at their full width.
    """
    n, width = len(lengths), int(lengths.max())
    if n <= max_rows and (not max_tokens or n * width <= max_tokens):
        return [MiniBatch(torch.arange(n), width)]
    order = torch.argsort(lengths, stable=True)
    size = lengths[order].tolist()
    out, start = [], 0
    for i in range(1, n + 1):
        full = i == n or i - start == max_rows or (max_tokens and (i - start + 1) * size[i] > max_tokens)
        if full:
            out.append(MiniBatch(order[start:i], size[i - 1]))
            start = i
    return out


def padded_minibatches(num_rows: int, width: int, size: int, generator: torch.Generator) -> list[MiniBatch]:
    """Random mini-batches of ``size`` rows at the batch's full ``width`` (the update before issue 21;
    the batch was padded with dummy rows to a multiple of ``size``)."""
    order = torch.randperm(num_rows, generator=generator)
    return [MiniBatch(order[start : start + size], width) for start in range(0, num_rows, size)]


def to_token_grid(grid: np.ndarray, batch: SegmentBatch, tb: TokenBatch) -> Tensor:
    """Credit-layer (S, max_optimised) values -> (S, T) at each segment's optimised token positions.

    Both sides list a row's optimised tokens in generation order, so row-major boolean indexing pairs
    the k-th optimised token of a row with column k of the credit grid.
    """
    out = torch.zeros(tb.tokens.shape, dtype=torch.float32, device=tb.tokens.device)
    real = torch.from_numpy(grid[batch.token_mask]).to(out.device, torch.float32)
    rows = batch.num_segments
    out[:rows][tb.optimised[:rows]] = real
    return out


def from_token_grid(values: Tensor, batch: SegmentBatch, tb: TokenBatch) -> np.ndarray:
    """The inverse of :func:`to_token_grid`: (S, T) per-token values -> the credit layer's (S, max_optimised)."""
    grid = np.zeros(batch.shape)
    rows = batch.num_segments
    grid[batch.token_mask] = values[:rows][tb.optimised[:rows]].detach().cpu().double().numpy()
    return grid


def outside_phases(batch: SegmentBatch, tb: TokenBatch, phases: tuple[Phase, ...]) -> np.ndarray:
    """(S, max_optimised) True on the batch's optimised tokens of no phase in ``phases``."""
    inside = torch.zeros_like(tb.phase, dtype=torch.bool)
    for phase in phases:
        inside |= tb.phase == int(phase)
    return batch.token_mask & ~(from_token_grid(inside.float(), batch, tb) > 0.5)


def keys_attended(batch: SegmentBatch, tb: TokenBatch) -> np.ndarray:
    """(S,) per row, the context each of its optimised tokens was generated from, summed (the keys read)."""
    rows = batch.num_segments
    positions = torch.arange(tb.tokens.shape[1], device=tb.tokens.device)
    return (tb.optimised[:rows] * positions).sum(dim=1).cpu().double().numpy()


def score(policy: Policy, tb: TokenBatch, table: Tensor, temperature: float) -> Any:
    """The policy's scores of the batch's optimised tokens, each under its phase's allowed tokens."""
    allowed = table[tb.phase]  # (S, T, V)
    return score_tokens(policy, tb.tokens, allowed, tb.optimised, temperature=temperature)


@torch.no_grad()
def score_in(batches: list[MiniBatch], policy: Policy, tb: TokenBatch, table: Tensor,
             temperature: float) -> TokenScores:
    """:func:`score` of the whole batch without gradients, computed mini-batch by mini-batch."""
    S, T = tb.tokens.shape
    grids = [torch.zeros(S, T, device=tb.tokens.device) for _ in range(3)]
    has_values = True
    for mb in batches:
        sc = score(policy, tb.take(mb), table, temperature)
        has_values = sc.values is not None
        for grid, part in zip(grids, (sc.logprobs, sc.entropy, sc.values), strict=True):
            if part is not None:
                grid[mb.rows, : mb.width] = part
    return TokenScores(grids[0], grids[1], grids[2] if has_values else None)


def check_finite(name: str, value: Tensor | Sequence[Tensor], step: int) -> None:
    """Raise :class:`~simlab.errors.TrainingDiverged` unless every value is finite, naming the first that is
    not. One device sync however many values: an update checks its mini-batches' losses together, before
    its optimiser step, instead of waiting for the device after each mini-batch."""
    if not isinstance(value, Tensor):
        if not value:
            return
        value = torch.stack(list(value))
    finite = torch.isfinite(value)
    if not bool(finite.all()):
        first = value.reshape(-1)[~finite.reshape(-1)][0]
        raise TrainingDiverged(f"{name} is {float(first)} at step {step}; stopping before the optimiser step")
