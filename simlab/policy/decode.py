"""Phase-masked distributions, sampling, training-time token scores and batched KV-cache decoding.

One function, :func:`masked_log_softmax`, defines the distribution the policy acts from: logits over
temperature with every disallowed token at -inf. Sampling (rollouts) and :func:`score_tokens`
(training) both go through it, so the log-probs a rollout records and the ones the update recomputes
are the same quantity.

A phase mask is a boolean ``(..., V)`` tensor, True = the token may be produced now (action tokens,
summary tokens, answer tokens, ...). The harness owns the phases; this module only applies them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from simlab.policy.model import Ints, KVCache, Policy, check_room, host_ints, to_device
from simlab.rules import Positive, check_value


def check_temperature(temperature: float) -> float:
    """``temperature`` as a float, or ``ValueError`` unless it is a number > 0."""
    return float(check_value("temperature", temperature, Positive))


def masked_log_softmax(logits: Tensor, allowed: Tensor | None = None, temperature: float = 1.0) -> Tensor:
    """log softmax(logits / temperature) over the allowed tokens; disallowed entries are -inf.

    Args:
        logits: (..., V) raw logits.
        allowed: boolean mask broadcastable to ``logits``, True = allowed; None allows everything.
            A row with no allowed token gives NaN: callers check for it where it can happen.
        temperature: divides the logits; > 0.
    """
    z = logits.float() / check_temperature(temperature)
    if allowed is not None:
        z = z.masked_fill(~allowed, float("-inf"))
    return torch.log_softmax(z, dim=-1)


def masked_entropy(logp: Tensor, allowed: Tensor | None = None) -> Tensor:
    """(...,) entropy of the distribution with log-probs ``logp`` (..., V); disallowed tokens add 0."""
    # p = 0 at a disallowed token, but 0 * -inf is NaN; zero its log-prob instead (keeps gradients finite).
    logp_safe = logp.masked_fill(~allowed, 0.0) if allowed is not None else logp
    return -(logp.exp() * logp_safe).sum(dim=-1)


class Sample(NamedTuple):
    """One sampled token per row, with its log-prob and the value of the state it was drawn in."""

    tokens: Tensor
    """(B,) sampled token ids."""
    logprobs: Tensor
    """(B,) log-prob of each token under the masked, tempered distribution it was drawn from."""
    values: Tensor | None
    """(B,) value of the state the token was sampled in; None without a value head."""


def sample(
    logits: Tensor,
    allowed: Tensor | None = None,
    *,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    greedy: bool = False,
) -> tuple[Tensor, Tensor]:
    """Draw one token per row from ``logits`` (B, V) restricted to ``allowed`` (B, V).

    ``greedy`` takes the most likely allowed token instead of drawing (evaluation); its log-prob is
    still reported under the tempered, masked distribution. Reproducible for a given ``generator``.

    Returns:
        tokens (B,) and their log-probs (B,).
    """
    if allowed is not None:
        allowed = allowed.to(device=logits.device, dtype=torch.bool).expand_as(logits)
        empty = ~allowed.any(dim=-1)
        if bool(empty.any()):
            rows = torch.nonzero(empty).flatten().tolist()
            raise ValueError(f"allowed masks of rows {rows} allow no token; every row needs at least one")
    return draw(logits, allowed, temperature=temperature, generator=generator, greedy=greedy)


def draw(
    logits: Tensor,
    allowed: Tensor | None,
    *,
    temperature: float,
    generator: torch.Generator | None,
    greedy: bool,
) -> tuple[Tensor, Tensor]:
    """:func:`sample` without its check that every row allows a token, which reads the device back;
    callers check their masks on the host instead."""
    logp = masked_log_softmax(logits, allowed, temperature)  # (B, V)
    tokens = logp.argmax(dim=-1) if greedy else torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


class TokenScores(NamedTuple):
    """Per-token quantities for training, aligned with the tokens: index t is about producing token t."""

    logprobs: Tensor
    """(B, T) log p(tokens[:, t] | tokens[:, :t]) under the phase mask; 0 where the mask is 0."""
    entropy: Tensor
    """(B, T) entropy of the masked distribution token t was drawn from; 0 where the mask is 0."""
    values: Tensor | None
    """(B, T) value of the state before token t (the one it was sampled in); 0 where the mask is 0."""


def score_tokens(
    policy: Policy,
    tokens: Tensor,
    allowed: Tensor | None = None,
    mask: Tensor | None = None,
    *,
    temperature: float = 1.0,
) -> TokenScores:
    """Training forward: log-prob, entropy and value for each realised token of right-padded rows.

    Args:
        policy: the model (its train/eval mode is the caller's).
        tokens: (B, T) token ids, right-padded.
        allowed: phase masks broadcastable to (B, T, V); ``allowed[b, t]`` is the set token ``t`` was
            chosen from. Build it as ``phase_masks[phase]`` from a (P, V) table and a (B, T) phase id.
        mask: (B, T) 1 = this token counts (an optimised token); default: every token but the first.
            ``mask[:, 0]`` must be 0, since nothing precedes the first token.
        temperature: the sampling temperature the tokens were drawn at.

    Raises:
        ValueError: a counted token that its phase mask disallows (or a mask that allows nothing).
    """
    B, T = tokens.shape
    if mask is None:
        mask = torch.ones(B, T, dtype=torch.bool, device=tokens.device)
        mask[:, 0] = False
    mask = mask.to(device=tokens.device).bool()
    if bool(mask[:, 0].any()):
        raise ValueError("mask[:, 0] must be 0: the first token of a row has no state to be scored from")
    out = policy(tokens)
    logits = out.logits[:, :-1]  # (B, T-1, V): position t-1 predicts token t
    target = tokens[:, 1:]  # (B, T-1)
    counts = mask[:, 1:]  # (B, T-1)
    if allowed is not None:
        V = logits.shape[-1]
        allowed = allowed.to(device=tokens.device, dtype=torch.bool).expand(B, T, V)[:, 1:]
        # Positions that do not count may carry any mask (env tokens often allow nothing); lifting
        # their restriction keeps them finite, so that 0 * NaN never reaches a loss.
        allowed = allowed | ~counts[..., None]  # (B, T-1, V)
        bad = counts & ~allowed.gather(-1, target[..., None]).squeeze(-1)
        if bool(bad.any()):
            where = torch.nonzero(bad)[0].tolist()
            raise ValueError(
                f"token {int(tokens[where[0], where[1] + 1])} at (row {where[0]}, position {where[1] + 1}) "
                "counts but its phase mask disallows it"
            )
    logp = masked_log_softmax(logits, allowed, temperature)  # (B, T-1, V)
    zero = torch.zeros(B, 1, device=tokens.device)
    token_logp = torch.where(counts, logp.gather(-1, target[..., None]).squeeze(-1), 0.0)
    entropy = torch.where(counts, masked_entropy(logp, allowed), 0.0)
    values = None
    if out.values is not None:
        values = torch.cat([zero, torch.where(counts, out.values[:, :-1], 0.0)], dim=1)
    return TokenScores(
        logprobs=torch.cat([zero, token_logp], dim=1),
        entropy=torch.cat([zero, entropy], dim=1),
        values=values,
    )


class StepOutput(NamedTuple):
    """What one decode step gives: the next-token logits and the state values of every row."""

    logits: Tensor
    """(B, V) fp32 next-token logits after each row's latest token."""
    values: Tensor | None
    """(B,) value of each row's current state; None without a value head."""


MIN_GEMM_ROWS = 4
"""MKL's fp32 GEMM rounds differently below 4 rows. Decoding used to run every environment's row on
every call; to keep its results bit for bit while computing only the rows asked for, a call never
runs fewer token rows than that (idle rows fill up) unless the whole batch has fewer."""


class Decoder:
    """KV-cache incremental decoding for a batch of ``B`` environments, one cache row each.

    Every row has its own length; appends are ragged (right-padded tokens plus a per-row count), and
    only the rows that receive tokens are computed. The decoder remembers the latest logits and value
    of each row, so :meth:`sample` can be called after any append. Runs without autograd; put the
    policy in eval mode for rollouts.

    When a compaction starts a new segment in some rows, :meth:`reset_rows` re-prefills only those
    rows in place (cost O(R * T) tokens, the same as a prefill of R rows); the other rows keep their
    cache untouched.

    The results equal, bit for bit on the CPU, those of running the whole batch on every call: each
    append attends over the span the whole batch would have (the longest row), the heads run on a
    whole-batch matrix (a one-column GEMM rounds by row position), and small calls are padded to
    :data:`MIN_GEMM_ROWS` token rows.
    """

    def __init__(self, policy: Policy, batch_size: int) -> None:
        self.policy = policy
        self.cache: KVCache = policy.new_cache(batch_size)
        V = policy.config.vocab_size
        self.logits = torch.zeros(batch_size, V, device=policy.device)  # (B, V)
        self.values = torch.zeros(batch_size, device=policy.device)  # (B,)

    @property
    def batch_size(self) -> int:
        """Rows the decoder serves."""
        return self.cache.batch_size

    @property
    def lengths(self) -> Tensor:
        """(B,) tokens currently held by each row (a copy, in host memory)."""
        return torch.from_numpy(self.cache.lengths.copy())

    def _check(self, tokens: Tensor, lengths: Ints, rows: int) -> tuple[Tensor, np.ndarray]:
        """Validated tokens on the policy's device and lengths in host memory (checked on the host)."""
        tokens = torch.as_tensor(tokens)
        if tokens.dim() != 2 or tokens.shape[0] != rows or tokens.dtype != torch.long:
            raise ValueError(
                f"tokens must be a ({rows}, T) int64 tensor, got {tuple(tokens.shape)} {tokens.dtype}"
            )
        counts = host_ints(lengths)
        if counts.shape != (rows,):
            raise ValueError(f"lengths must have shape ({rows},), got {tuple(counts.shape)}")
        T = tokens.shape[1]
        if bool(((counts < 0) | (counts > T)).any()):
            raise ValueError(f"lengths must lie in [0, {T}], got {counts.tolist()}")
        host = tokens.cpu().numpy()
        valid = np.arange(T)[None, :] < counts[:, None]
        V = self.policy.config.vocab_size
        if bool((valid & ((host < 0) | (host >= V))).any()):
            raise ValueError(f"token ids must lie in [0, {V}) (policy.vocab_size)")
        return tokens.to(self.policy.device, non_blocking=True), counts

    def _rows(self, rows: Ints) -> np.ndarray:
        index = host_ints(rows)
        if (rows.dim() if isinstance(rows, Tensor) else np.ndim(rows)) != 1 or np.unique(index).size != index.size:
            raise ValueError(f"rows must be a 1-D tensor of distinct row indices, got {index.tolist()}")
        if bool(((index < 0) | (index >= self.batch_size)).any()):
            raise ValueError(f"rows must lie in [0, {self.batch_size}), got {index.tolist()}")
        return index

    @torch.no_grad()
    def _append(self, rows: np.ndarray, tokens: Tensor, counts: np.ndarray, *, reset: bool) -> None:
        """Append ``counts[i]`` tokens of ``tokens[i]`` to row ``rows[i]`` and remember their heads.

        ``reset``: the rows were just emptied and are prefilled as a batch of their own (attention
        span and head matrix of those rows alone); otherwise as part of the whole batch.
        """
        if reset:
            span = max(int(counts.max(initial=0)), 1)
        else:
            rows, tokens, counts = self._fill(rows, tokens, counts)
            after = self.cache.lengths.copy()
            after[rows] += counts
            span = max(int(after.max(initial=0)), 1)
        every = rows.size == self.batch_size and bool((rows == np.arange(rows.size)).all())
        h = self.policy.forward_cached(tokens, counts, self.cache, rows=None if every else rows, span=span)
        last = to_device(h.device, np.maximum(counts - 1, 0))  # (A,)
        h_last = h[torch.arange(h.shape[0], device=h.device), last]  # (A, C)
        logits, values = self._heads(rows, h_last, reset)
        got = counts > 0
        if not got.all():
            keep = to_device(h.device, np.flatnonzero(got))
            rows, logits = rows[got], logits[keep]
            values = values[keep] if values is not None else None
        index = to_device(h.device, rows)
        self.logits[index] = logits
        if values is not None:
            self.values[index] = values

    def _heads(self, rows: np.ndarray, h_last: Tensor, reset: bool) -> tuple[Tensor, Tensor | None]:
        """Logits (A, V) and values (A,) at ``h_last`` (A, C), from the matrix whole-batch decoding
        had: the reset rows alone, else all B rows at their own positions (a one-column GEMM rounds
        by row position)."""
        if reset:
            out = self.policy.heads(h_last)
            return out.logits, out.values
        index = to_device(h_last.device, rows)
        whole = h_last.new_zeros(self.batch_size, h_last.shape[-1])  # (B, C)
        whole[index] = h_last
        out = self.policy.heads(whole)
        return out.logits[index], out.values[index] if out.values is not None else None

    def _fill(self, rows: np.ndarray, tokens: Tensor, counts: np.ndarray) -> tuple[np.ndarray, Tensor, np.ndarray]:
        """``rows`` plus idle rows (nothing appended) up to :data:`MIN_GEMM_ROWS` token rows."""
        T = tokens.shape[1]
        need = min(-(-MIN_GEMM_ROWS // T), self.batch_size) - rows.size
        if need <= 0:
            return rows, tokens, counts
        idle = np.setdiff1d(np.arange(self.batch_size), rows)[:need]
        pad = tokens.new_zeros(idle.size, T)
        return (np.concatenate([rows, idle]), torch.cat([tokens, pad]),
                np.concatenate([counts, np.zeros(idle.size, dtype=np.int64)]))

    def state(self) -> StepOutput:
        """Latest logits (B, V) and values (B,) of every row: copies, since later appends update the
        decoder's own buffers in place."""
        values = self.values.clone() if self.policy.value is not None else None
        return StepOutput(self.logits.clone(), values)

    def extend(self, tokens: Tensor, lengths: Ints, rows: Ints | None = None) -> StepOutput:
        """Append ``lengths[i]`` tokens of ``tokens`` (R, T) to row ``rows[i]`` (default: row ``i`` of
        all B); a length of 0 leaves the row unchanged."""
        index = np.arange(self.batch_size) if rows is None else self._rows(rows)
        tokens, counts = self._check(tokens, lengths, index.size)
        busy = np.flatnonzero(counts)
        if busy.size:
            if busy.size < index.size:
                tokens = tokens[to_device(tokens.device, busy)]
            self._append(index[busy], tokens, counts[busy], reset=False)
        return self.state()

    def prefill(self, tokens: Tensor, lengths: Ints) -> StepOutput:
        """Forget every row and fill it with ``tokens`` (B, T), right-padded to ``lengths`` (B,)."""
        tokens, counts = self._check(tokens, lengths, self.batch_size)
        self.cache.lengths[:] = 0
        return self.extend(tokens, counts)

    def decode_step(self, next_tokens: Tensor, active: Ints | None = None) -> StepOutput:
        """Append one token per row (B,); rows with ``active`` False (finished envs) are left alone."""
        next_tokens = torch.as_tensor(next_tokens, device=self.policy.device)
        n_new = np.ones(self.batch_size, dtype=np.int64) if active is None else host_ints(active)
        return self.extend(next_tokens[:, None], n_new)

    def append_sampled(self, rows: np.ndarray, tokens: Tensor) -> None:
        """Append one sampled token (R,) to each of ``rows`` (distinct, host memory) without reading
        the device back: the tokens come from :meth:`sample` or :func:`draw`, so they are in range."""
        self._append(rows, tokens[:, None], np.ones(rows.size, dtype=np.int64), reset=False)

    def reset_rows(self, rows: Ints, tokens: Tensor, lengths: Ints) -> StepOutput:
        """Re-prefill rows ``rows`` (R,) with ``tokens`` (R, T) and ``lengths`` (R,); others are kept."""
        index = self._rows(rows)
        tokens, counts = self._check(tokens, lengths, index.size)
        check_room(index, counts, self.policy.config.max_len)  # before emptying: a failed call changes nothing
        self.cache.lengths[index] = 0
        if index.size:
            self._append(index, tokens, counts, reset=True)
        return self.state()

    def sample(
        self,
        allowed: Tensor | None = None,
        *,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
        greedy: bool = False,
    ) -> Sample:
        """Sample each row's next token from its latest logits under ``allowed`` (B, V).

        Does not append the token: call :meth:`decode_step` with it (the env may reject or end first).
        """
        empty = self.cache.lengths == 0
        if bool(empty.any()):
            raise ValueError(f"rows {np.flatnonzero(empty).tolist()} hold no tokens; prefill them before sampling")
        tokens, logprobs = sample(
            self.logits, allowed, temperature=temperature, generator=generator, greedy=greedy
        )
        return Sample(tokens, logprobs, self.state().values)
