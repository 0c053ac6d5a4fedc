"""The policy's configuration section and its plain-dict form, without torch: checking a run's settings
(:mod:`simlab.config`) reads this module, and a bad value is refused before torch is imported."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from simlab.rules import TOKENS_MAX, Real
from simlab.schema import Section


class PolicyConfig(Section):
    """Shape and options of the policy transformer. Every field is logged with a run."""

    SECTION = "policy"

    vocab_size: Annotated[int, Field(ge=2, le=2**18)]
    """Size of the shared token vocabulary (tasks, summaries and answers)."""
    n_layer: Annotated[int, Field(ge=1, le=1024)] = 3
    """Transformer blocks."""
    n_head: Annotated[int, Field(ge=1, le=1024)] = 4
    """Attention heads per block; must divide ``d_model``."""
    d_model: Annotated[int, Field(ge=1, le=TOKENS_MAX)] = 96
    """Residual stream width C."""
    max_len: Annotated[int, Field(ge=1, le=2 * TOKENS_MAX)] = 320
    """Most tokens one row may hold: the working window W plus a margin for the summary and one step."""
    dropout: Annotated[Real, Field(ge=0, lt=1)] = 0.0
    """Dropout on embeddings, attention weights and residual branches during training; in [0, 1)."""
    value_head: bool = True
    """Add a scalar value head on every position (PPO-style recipes); False for critic-free GRPO."""
    fused_attention: bool = True
    """Use ``F.scaled_dot_product_attention``; False runs the plain softmax(QK^T/sqrt(D))V path."""
    bf16: bool = True
    """Autocast matmuls to bf16 on CUDA; ignored on CPU, which always runs fp32."""

    def check(self) -> None:
        """The heads split the residual stream evenly."""
        if self.d_model % self.n_head != 0:
            raise self.invalid("n_head", f"d_model={self.d_model} must be divisible by n_head")


def config_to_dict(cfg: PolicyConfig) -> dict[str, object]:
    """Plain-dict form (for logging and checkpoints)."""
    return dict(cfg)


def config_from_dict(data: dict[str, object]) -> PolicyConfig:
    """Inverse of :func:`config_to_dict`; an unknown key is an error naming it."""
    known = set(PolicyConfig.field_names())
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown policy config keys {unknown}; known: {sorted(known)}")
    return PolicyConfig(**data)
