"""The policy: a small transformer with an LM head masked by phase, a value head, KV-cache decoding
and checkpoints. The trainer and the harness drive it; nothing here knows about tasks or credit.
"""

from simlab.policy.checkpoint import load_checkpoint, save_checkpoint
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
from simlab.policy.model import KVCache, Policy, PolicyConfig, PolicyOutput, critic_from

__all__ = [
    "Decoder",
    "KVCache",
    "Policy",
    "PolicyConfig",
    "PolicyOutput",
    "Sample",
    "StepOutput",
    "TokenScores",
    "autocast",
    "critic_from",
    "default_device",
    "load_checkpoint",
    "masked_entropy",
    "masked_log_softmax",
    "sample",
    "save_checkpoint",
    "score_tokens",
]
