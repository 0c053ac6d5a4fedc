"""The agent protocol: how the harness asks any agent (reference or learned) for tokens.

The harness owns the context; an agent only ever sees a batch of working contexts and returns the
tokens it generates. One call covers every environment that is in the same phase, so a batched
torch policy can serve it with one forward pass (or one KV-cached decode loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol, runtime_checkable

import numpy as np

from simlab.arrays import BoolArray, FloatArray, IntArray

ACTION_TURN = 2
"""Tokens an action or answer turn adds to the context: the marker and the generated token."""


class Phase(IntEnum):
    """What a token is; also the label the harness stores for every token of a segment."""

    CONTEXT = 0
    """Not generated in this segment: prompt, markers, observations, v_sum, replayed tail, a frozen
    summariser's summary. Never optimised."""
    ACT = 1
    """An action (or the COMPACT action under the ``policy`` trigger)."""
    SUMMARY = 2
    """A summary token, generated after ``v_sum``."""
    ANSWER = 3
    """The final answer."""


@dataclass(frozen=True)
class Request:
    """One batched generation request."""

    phase: Phase
    """ACT, SUMMARY or ANSWER: the same for every row."""
    contexts: list[IntArray]
    """Per row, the working context the agent conditions on, ending with the phase's cue: the ACT or
    ANSWER marker, or the ``v_sum`` tokens."""
    num_tokens: int
    """Tokens to generate per row: 1 for ACT and ANSWER, ``m`` for SUMMARY."""
    allowed: BoolArray
    """(V,) the tokens the agent may emit in this phase (a phase-masked LM head applies it)."""
    env_ids: IntArray
    """(n,) which env of the batch each row belongs to."""
    window: int
    """W, the working window; an agent that times its own compaction reads it."""
    segment_ids: IntArray | None = None
    """(n,) index of the segment each row is in (0 = first). Within one segment a row's contexts only
    grow, except that a discarded step is cut off before the summary request; a KV-cached policy
    rebuilds its cache when the id changes and otherwise keeps the longest common prefix."""
    env: Any = None
    """The vector env, for privileged agents only (the oracle reads hidden state from it)."""
    stop_token: int | None = None
    """A variable-length request (``harness.summary_budget``): a row that emits this token has ended, and
    the harness reads nothing after it. An agent may stop generating once every row has ended (it fills
    the rest with the token); ``None``: every one of the ``num_tokens`` counts."""


@dataclass(frozen=True)
class Generation:
    """What an agent returns for a ``Request`` with n rows."""

    tokens: IntArray
    """(n, num_tokens) generated token ids, each allowed by the request."""
    logprobs: FloatArray | None = None
    """(n, num_tokens) log-probabilities of the sampled tokens under the agent, if it has them."""
    values: FloatArray | None = None
    """(n, num_tokens) critic values at the generated tokens, if the agent has a critic."""


@runtime_checkable
class Agent(Protocol):
    """Anything that turns a batch of contexts into tokens. ``generate`` is the whole protocol."""

    def generate(self, request: Request) -> Generation:
        """Return ``num_tokens`` allowed tokens for every row of ``request.contexts``."""
        ...


def check_generation(gen: Generation, request: Request, who: str) -> IntArray:
    """The generated tokens as an (n, num_tokens) array; raises naming the agent and the bad token."""
    tokens = np.asarray(gen.tokens)
    n = len(request.contexts)
    if tokens.shape != (n, request.num_tokens):
        raise ValueError(
            f"{who} returned tokens of shape {tokens.shape} for a {request.phase.name} request; "
            f"expected {(n, request.num_tokens)}"
        )
    if tokens.size:
        bad = (tokens < 0) | (tokens >= request.allowed.size)
        bad |= ~request.allowed[np.clip(tokens, 0, request.allowed.size - 1)]
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise ValueError(
                f"{who} emitted token {int(tokens[r, c])} in phase {request.phase.name}, "
                f"which is not allowed there; allowed: {np.flatnonzero(request.allowed).tolist()}"
            )
    for name in ("logprobs", "values"):
        arr = getattr(gen, name)
        if arr is not None and np.shape(arr) != tokens.shape:
            raise ValueError(f"{who} returned {name} of shape {np.shape(arr)}; expected {tokens.shape}")
    return tokens.astype(np.int64)
