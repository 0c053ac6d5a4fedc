"""The compaction harness: agent protocol, triggers, reference agents and the rollout loop.

Data flow: task (vector env) -> ``run_rollouts`` (builds contexts, fires compaction, asks the agent and
the summariser, cuts segments at atomic steps) -> ``RolloutBatch`` (a ``SegmentBatch`` for the credit
layer plus per-segment token arrays for the trainer).
"""

from simlab.harness.agents import AGENTS, make_agent
from simlab.harness.config import HarnessConfig
from simlab.harness.loop import run_rollouts
from simlab.harness.protocol import Agent, Generation, Phase, Request
from simlab.harness.records import RolloutBatch, RolloutRecord, SegmentTokens
from simlab.harness.triggers import TRIGGERS, Trigger

__all__ = [
    "AGENTS",
    "TRIGGERS",
    "Agent",
    "Generation",
    "HarnessConfig",
    "Phase",
    "Request",
    "RolloutBatch",
    "RolloutRecord",
    "SegmentTokens",
    "Trigger",
    "make_agent",
    "run_rollouts",
]
