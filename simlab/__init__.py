"""simlab: simulate compaction-aware reinforcement learning.

Data flow: task -> harness -> policy -> SegmentBatch -> credit -> update -> metrics; sweeps drive
training runs, the tracker stores them, the analysis layer reads them back.
"""

from simlab.credit import SegmentBatch, advantages, loss_weights, value_targets, whiten

__version__ = "0.1.0"

__all__ = ["SegmentBatch", "__version__", "advantages", "loss_weights", "value_targets", "whiten"]
