"""The policy: a small transformer with an LM head masked by phase, a value head, KV-cache decoding
and checkpoints. The trainer and the harness drive it; nothing here knows about tasks or credit.

Names load on first use (PEP 562), so that reading :class:`PolicyConfig` (``simlab.policy.config``)
to check a run's settings does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simlab import lazy

if TYPE_CHECKING:
    from simlab.policy.checkpoint import load_checkpoint, save_checkpoint
    from simlab.policy.config import PolicyConfig
    from simlab.policy.decode import (
        Decoder,
        Sample,
        StepOutput,
        TokenScores,
        masked_entropy,
        masked_log_softmax,
        sample,
        score_tokens,
    )
    from simlab.policy.device import autocast, default_device
    from simlab.policy.model import KVCache, Policy, PolicyOutput, critic_from

_HOME = {
    "checkpoint": ("load_checkpoint", "save_checkpoint"),
    "config": ("PolicyConfig",),
    "decode": ("Decoder", "Sample", "StepOutput", "TokenScores", "masked_entropy", "masked_log_softmax",
               "sample", "score_tokens"),
    "device": ("autocast", "default_device"),
    "model": ("KVCache", "Policy", "PolicyOutput", "critic_from"),
}
__all__ = [  # the names in _HOME (tests/policy/test_lazy_exports.py holds the two equal)
    "Decoder", "KVCache", "Policy", "PolicyConfig", "PolicyOutput", "Sample", "StepOutput", "TokenScores",
    "autocast", "critic_from", "default_device", "load_checkpoint", "masked_entropy", "masked_log_softmax",
    "sample", "save_checkpoint", "score_tokens",
]
__getattr__ = lazy.exports(__name__, _HOME)
