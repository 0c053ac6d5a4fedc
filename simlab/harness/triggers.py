"""Compaction triggers, registered by name: when a rollout's context is compacted, and how.

A trigger is checked after every atomic step. ``kind`` says what firing does: ``summary`` closes the
segment with a summary, ``slide`` drops the oldest steps without one, ``never`` keeps the full history
until it no longer fits the window. ``limit`` is the size the next segment's context must fit in; the
verbatim tail is shrunk to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from simlab.registry import Registry


class Geometry(Protocol):
    """What a trigger reads of a harness config (:class:`~simlab.harness.config.HarnessConfig`)."""

    @property
    def window(self) -> int:
        """W, in tokens."""

    @property
    def threshold(self) -> int:
        """L = floor(frac x W), in tokens."""

    @property
    def t_comp(self) -> int:
        """CompactionRL's T_comp, in tokens."""

    @property
    def chunk_steps(self) -> int:
        """MemAgent's steps per chunk."""


@dataclass(frozen=True)
class Trigger:
    """A compaction trigger: when it fires, what firing does, and the context size the next segment starts within."""

    name: str
    kind: Literal["summary", "slide", "never"]
    fires: Callable[[int, int, Geometry], bool]
    """(context length, steps in this segment, config) -> compact now?"""
    limit: Callable[[Geometry], int]
    """The context size the next segment starts within."""
    length_based: bool = True
    """Fires on context length (the discard rule applies) rather than on a step count."""
    agent_compacts: bool = False
    """The agent may emit COMPACT itself."""
    reads_frac: bool = False
    """Fires at, or starts the next segment within, L = floor(frac x W): a threshold drawn per group or
    per rollout (:func:`simlab.harness.config.draw_fracs`) moves it."""


TRIGGERS: Registry[Trigger] = Registry("trigger")


def _add(trigger: Trigger) -> None:
    TRIGGERS.add(trigger.name, trigger)


def _over_threshold(n: int, steps: int, cfg: Geometry) -> bool:
    return n > cfg.threshold


def _threshold(cfg: Geometry) -> int:
    return cfg.threshold


def _window(cfg: Geometry) -> int:
    return cfg.window


_add(Trigger("threshold", "summary", _over_threshold, _threshold, reads_frac=True))  # SUPO: context would pass L
_add(
    Trigger(
        "budget",
        "summary",
        lambda n, s, cfg: cfg.window - n < cfg.t_comp,
        lambda cfg: cfg.window - cfg.t_comp,
    )
)  # CompactionRL: remaining budget below T_comp
_add(
    Trigger("policy", "summary", _over_threshold, _threshold, agent_compacts=True, reads_frac=True)
)  # AutoCompact, L fallback
_add(Trigger("none", "never", lambda n, s, cfg: False, _window))  # ReAct: full history
_add(Trigger("sliding", "slide", _over_threshold, _threshold, reads_frac=True))  # truncation baseline
_add(
    Trigger("chunked", "summary", lambda n, s, cfg: s >= cfg.chunk_steps, _window, length_based=False)
)  # MemAgent: overwrite memory every chunk
_add(
    Trigger("every_step", "summary", lambda n, s, cfg: s >= 1, _window, length_based=False)
)  # MEM1: constant-size state rewritten every step
