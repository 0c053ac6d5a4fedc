"""simlab: simulate compaction-aware reinforcement learning.

Data flow: task -> harness -> policy -> SegmentBatch -> credit -> update -> metrics; sweeps drive
training runs, the tracker stores them, the analysis layer reads them back.

The credit layer's entry points are re-exported here, loaded on first use, so that importing any part
of simlab (the tasks, say) does not import the credit layer with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simlab.credit import SegmentBatch, advantages, loss_weights, value_targets, whiten

__version__ = "0.1.0"

_CREDIT = ("SegmentBatch", "advantages", "loss_weights", "value_targets", "whiten")


def __getattr__(name: str) -> Any:
    if name in _CREDIT:
        return getattr(importlib.import_module("simlab.credit"), name)
    raise AttributeError(f"module 'simlab' has no attribute {name!r}")


__all__ = ["SegmentBatch", "__version__", "advantages", "loss_weights", "value_targets", "whiten"]
