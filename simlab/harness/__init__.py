"""The compaction harness: agent protocol, triggers, reference agents and the rollout loop.

Data flow: task (vector env) -> ``run_rollouts`` (builds contexts, fires compaction, asks the agent and
the summariser, cuts segments at atomic steps) -> ``RolloutBatch`` (a ``SegmentBatch`` for the credit
layer plus per-segment token arrays for the trainer).

Names load on first use (PEP 562, :mod:`simlab.lazy`), so that reading :class:`HarnessConfig` (the
command line builds ``simlab inspect``'s options from it) does not import the rollout loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simlab import lazy

if TYPE_CHECKING:
    from simlab.harness.agents import AGENTS, make_agent
    from simlab.harness.config import HarnessConfig
    from simlab.harness.loop import run_rollouts
    from simlab.harness.protocol import Agent, Generation, Phase, Request
    from simlab.harness.records import RolloutBatch, RolloutRecord, SegmentTokens
    from simlab.harness.triggers import TRIGGERS, Trigger

_HOME = {
    "agents": ("AGENTS", "make_agent"),
    "config": ("HarnessConfig",),
    "loop": ("run_rollouts",),
    "protocol": ("Agent", "Generation", "Phase", "Request"),
    "records": ("RolloutBatch", "RolloutRecord", "SegmentTokens"),
    "triggers": ("TRIGGERS", "Trigger"),
}
__all__ = [  # the names in _HOME (tests/policy/test_lazy_exports.py holds the two equal)
    "AGENTS", "TRIGGERS", "Agent", "Generation", "HarnessConfig", "Phase", "Request", "RolloutBatch",
    "RolloutRecord", "SegmentTokens", "Trigger", "make_agent", "run_rollouts",
]
__getattr__ = lazy.exports(__name__, _HOME)
