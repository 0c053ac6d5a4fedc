"""The update step's losses: PPO/GRPO clipped policy loss, critic loss, and their diagnostics.

Every loss here is a weighted sum, ``(w * per_token_loss).sum()``, where ``w`` comes from a credit-layer
normaliser (:func:`simlab.loss_weights`): reduction is decided there, never here. Tensors are
batch-first ``(B, T)``; weights are 0 on padding, dummy rows and masked rollouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from simlab.schema import POSITIVE, check_value


def check_clip(name: str, value: float) -> float:
    """``value`` as a float, or ``ConfigError`` unless it is a finite number > 0 (a clip range)."""
    return float(check_value(name, value, POSITIVE))


@dataclass(frozen=True)
class PolicyLossStats:
    """Diagnostics of one policy-loss evaluation, weighted like the loss."""

    clip_fraction: float
    """Weighted share of tokens whose ratio was clipped."""
    approx_kl: float
    """Weighted k3 estimate of KL(old || new): E[(r - 1) - log r]."""


def clipped_policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    weights: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> tuple[Tensor, PolicyLossStats]:
    """PPO's clipped surrogate with separate lower and upper clip ranges (DAPO's clip-higher).

    r_t  = exp(log pi(a_t) - log pi_old(a_t))
    l_t  = -min(r_t * A_t, clip(r_t, 1 - eps_low, 1 + eps_high) * A_t)
    loss = sum_t w_t * l_t

    Shapes: all (B, T); returns a scalar loss. SUPO uses eps_low 0.20 / eps_high 0.28, no KL, no entropy.
    """
    eps_low = check_clip("eps_low", eps_low)
    eps_high = check_clip("eps_high", eps_high)
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    loss = (weights * per_token).sum()
    with torch.no_grad():
        total = weights.sum().clamp_min(1e-12)
        was_clipped = (clipped < unclipped).to(weights.dtype)
        stats = PolicyLossStats(
            clip_fraction=float((weights * was_clipped).sum() / total),
            approx_kl=float((weights * (ratio - 1.0 - log_ratio)).sum() / total),
        )
    return loss, stats


def value_loss(values: Tensor, targets: Tensor, weights: Tensor) -> Tensor:
    """Critic regression: loss = sum_t w_t * 0.5 * (V_t - target_t)^2.  Shapes: (B, T) -> scalar."""
    return (weights * 0.5 * (values - targets) ** 2).sum()


def explained_variance(values: Tensor, targets: Tensor, mask: Tensor) -> float:
    """1 - Var[target - V] / Var[target] over masked tokens (1 = perfect critic, <= 0 = useless)."""
    m = mask.bool()
    if int(m.sum()) < 2:
        return float("nan")
    t, v = targets[m].double(), values[m].double()
    var_t = t.var()
    if var_t == 0:
        return float("nan")
    return float(1.0 - (t - v).var() / var_t)


def weighted_entropy(entropy: Tensor, weights: Tensor) -> float:
    """Weighted mean token entropy, for logging."""
    total = weights.sum()
    return float((weights * entropy).sum() / total) if total > 0 else float("nan")
