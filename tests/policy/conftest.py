"""Tiny policies shared by the policy tests (d_model=32, 2 layers: every test stays well under a second)."""

from __future__ import annotations

import pytest
import torch

from simlab.policy import Policy, PolicyConfig

VOCAB = 23


def tiny_policy(seed: int = 0, *, sharp: bool = True, **overrides: object) -> Policy:
    """A tiny policy in eval mode. ``sharp`` redraws every weight at std 0.3: the GPT-2 init gives
    near-uniform attention and logits, under which a wrong position or mask would hardly show."""
    torch.manual_seed(seed)
    fields = {"vocab_size": VOCAB, "n_layer": 2, "n_head": 4, "d_model": 32, "max_len": 48, **overrides}
    policy = Policy(PolicyConfig(**fields))  # type: ignore[arg-type]
    if sharp:
        with torch.no_grad():
            for p in policy.parameters():
                p.normal_(0.0, 0.3)
    return policy.eval()


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)
