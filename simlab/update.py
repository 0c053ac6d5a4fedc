"""The update step's losses: PPO/GRPO clipped policy loss, critic loss, and their diagnostics; the
importance ratios (``RATIOS``), the learning-rate schedules (``SCHEDULES``) and the optimisers
(``OPTIMISERS``) they are taken with.

Every loss here is a weighted sum, ``(w * per_token_loss).sum()``, where ``w`` comes from a credit-layer
normaliser (:func:`simlab.loss_weights`): reduction is decided there, never here. Tensors are
batch-first ``(B, T)``, one row per segment; weights are 0 on padding, dummy rows, masked rollouts and
masked tokens, and a row's tokens with weight > 0 are the ones its sequence-level ratio averages over.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from simlab.registry import Registry
from simlab.rules import NonNegative, Positive, check_value

Ratio = Callable[[Tensor, Tensor], Tensor]
"""(log_ratio: (B, T), mask: (B, T) tokens that count) -> (B, T) the importance ratio of each token."""
RATIOS: Registry[Ratio] = Registry("ratio")


@RATIOS.register("token")
def token_ratio(log_ratio: Tensor, mask: Tensor) -> Tensor:
    """r_t = exp(log pi(a_t) - log pi_old(a_t)): each token's own ratio, clipped token by token (PPO)."""
    return torch.exp(log_ratio)


@RATIOS.register("segment", aliases=("gspo",))
def segment_ratio(log_ratio: Tensor, mask: Tensor) -> Tensor:
    """GSPO's sequence ratio with a segment as the sequence (Zheng et al. 2025, eqs. 7 and 13, GSPO-token):

    s_i   = exp( sum_t m_t * (log pi(a_t) - log pi_old(a_t)) / sum_t m_t )   the geometric mean over the row
    s_i,t = sg[s_i] * pi(a_t) / sg[pi(a_t)]                     value s_i, gradient s_i * grad log pi(a_t)

    Every token of a row carries the row's ratio, so the clip acts per segment. With an advantage and a
    weight constant over the row, the gradient is GSPO's sequence-level one. Shapes: (B, T) -> (B, T).
    """
    m = mask.to(log_ratio.dtype)
    log_s = (log_ratio * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp_min(1.0)  # (B, 1)
    return torch.exp(log_ratio - log_ratio.detach() + log_s.detach())


Schedule = Callable[[float], float]
"""(progress p >= 0, the share of the planned schedule used) -> learning-rate factor."""
SCHEDULES: Registry[Schedule] = Registry("lr_schedule")


@SCHEDULES.register("constant")
def constant_lr(p: float) -> float:
    """f(p) = 1: the learning rate as set, whatever the clock says."""
    return 1.0


@SCHEDULES.register("linear")
def linear_lr(p: float) -> float:
    """f(p) = max(0, 1 - p): linear decay to 0 at the end of the planned schedule (Megatron's ``linear``)."""
    return max(0.0, 1.0 - p)


@SCHEDULES.register("cosine")
def cosine_lr(p: float) -> float:
    """f(p) = (1 + cos(pi * min(p, 1))) / 2: cosine decay to 0 (Loshchilov and Hutter 2017, eq. 5, no restart)."""
    return 0.5 * (1.0 + math.cos(math.pi * min(p, 1.0)))


class Optimiser:
    """A first-order optimiser over one group of parameters, with torch.optim's interface as far as simlab
    uses it: ``param_groups[0]["lr"]`` (the schedule writes it), ``zero_grad`` and ``step``.

    Why not ``torch.optim``: its ``Optimizer`` imports ``torch._dynamo`` on first use (1.1-2.4 s on this
    project's machine, 8-15% of a short training run, paid again by every worker process), and simlab
    never compiles the optimiser step. The two rules below are the textbook ones, written with the same
    tensor operations in the same order as torch's single-tensor path (the one it takes on the CPU), so
    their steps are bit for bit torch's there (``tests/update/test_optimisers.py``).
    """

    def __init__(self, params: Iterable[Tensor], lr: float) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.param_groups: list[dict[str, Any]] = [{"lr": float(lr), "params": self.params}]

    @property
    def lr(self) -> float:
        """The learning rate of the next step."""
        return float(self.param_groups[0]["lr"])

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient (dropped, or zeroed in place when ``set_to_none`` is False)."""
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        for p in self.params:
            if p.grad is not None:
                self.update(p, p.grad)

    def update(self, p: Tensor, grad: Tensor) -> None:
        """Move ``p`` (in place) by the rule, given its gradient."""
        raise NotImplementedError


class Adam(Optimiser):
    """Adam (Kingma and Ba 2015, algorithm 1) with torch's defaults: betas (0.9, 0.999), eps 1e-8.

    m <- m + (1 - b1) (g - m);   v <- b2 v + (1 - b2) g^2;
    p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
    """

    def __init__(self, params: Iterable[Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        super().__init__(params, lr)
        self.beta1, self.beta2, self.eps = betas[0], betas[1], eps
        self.state: dict[Tensor, tuple[int, Tensor, Tensor]] = {}

    def update(self, p: Tensor, grad: Tensor) -> None:
        """One Adam step of ``p``; its first creates the moments (zeros) and the step count."""
        t, m, v = self.state.get(p) or (0, torch.zeros_like(p), torch.zeros_like(p))
        t += 1
        m.lerp_(grad, 1 - self.beta1)
        v.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
        step_size = self.lr / (1 - self.beta1**t)
        denom = (v.sqrt() / (1 - self.beta2**t) ** 0.5).add_(self.eps)
        p.addcdiv_(m, denom, value=-step_size)
        self.state[p] = (t, m, v)


class SGD(Optimiser):
    """Plain SGD, no momentum: p <- p - lr g."""

    def update(self, p: Tensor, grad: Tensor) -> None:
        """p <- p - lr g."""
        p.add_(grad, alpha=-self.lr)


OptimiserFactory = Callable[[Iterable[Tensor], float], Optimiser]
"""(parameters, learning rate) -> the optimiser of the policy or the critic (``train.optimizer``)."""
OPTIMISERS: Registry[OptimiserFactory] = Registry("optimizer")


@OPTIMISERS.register("adam")
def adam(params: Iterable[Tensor], lr: float) -> Optimiser:
    """Adam (torch's defaults): every recipe's optimiser; its step barely depends on the gradient's scale."""
    return Adam(params, lr)


@OPTIMISERS.register("sgd")
def sgd(params: Iterable[Tensor], lr: float) -> Optimiser:
    """Plain SGD, no momentum: a step of lr x the gradient, so a rescaled gradient is a rescaled step."""
    return SGD(params, lr)


def lr_factor(schedule: str, used: float, planned: float) -> float:
    """f(used / planned) of schedule ``schedule``: the learning-rate factor once ``used`` of ``planned``
    units (rollouts or rows) have been trained on."""
    planned = float(check_value("planned", planned, Positive))
    used = float(check_value("used", used, NonNegative))
    return SCHEDULES.get(schedule, "lr_schedule")(used / planned)


def check_clip(name: str, value: float) -> float:
    """``value`` as a float, or ``ConfigError`` unless it is a finite number > 0 (a clip range)."""
    return float(check_value(name, value, Positive))


@dataclass(frozen=True)
class PolicyLossStats:
    """Diagnostics of one policy-loss evaluation, weighted like the loss: 0-d tensors on the loss's device
    (reading one waits for the device, so the trainer reads an update's all at once)."""

    clip_fraction: Tensor
    """Weighted share of tokens whose ratio was clipped."""
    approx_kl: Tensor
    """Weighted k3 estimate of KL(old || new): E[(r - 1) - log r]."""


def clipped_policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    weights: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    ratio: str = "token",
) -> tuple[Tensor, PolicyLossStats]:
    """PPO's clipped surrogate with separate lower and upper clip ranges (DAPO's clip-higher).

    r_t  = exp(log pi(a_t) - log pi_old(a_t))      (``ratio='token'``; ``'segment'``: GSPO's s_i,t)
    l_t  = -min(r_t * A_t, clip(r_t, 1 - eps_low, 1 + eps_high) * A_t)
    loss = sum_t w_t * l_t

    Shapes: all (B, T), one row per segment; returns a scalar loss. SUPO uses eps_low 0.20 / eps_high
    0.28, no KL, no entropy; GSPO clips its sequence ratio far tighter (3e-4 / 4e-4). ``ratio`` is a name
    in ``RATIOS``; a segment ratio averages over the row's tokens with weight > 0.
    """
    eps_low = check_clip("eps_low", eps_low)
    eps_high = check_clip("eps_high", eps_high)
    log_ratio = logp - old_logp
    ratio_t = RATIOS.get(ratio, "ratio")(log_ratio, weights > 0)
    unclipped = ratio_t * advantages
    clipped = torch.clamp(ratio_t, 1.0 - eps_low, 1.0 + eps_high) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    loss = (weights * per_token).sum()
    with torch.no_grad():
        total = weights.sum().clamp_min(1e-12)
        was_clipped = (clipped < unclipped).to(weights.dtype)
        stats = PolicyLossStats(
            clip_fraction=(weights * was_clipped).sum() / total,
            approx_kl=(weights * (torch.exp(log_ratio) - 1.0 - log_ratio)).sum() / total,
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


def weighted_entropy(entropy: Tensor, weights: Tensor) -> Tensor:
    """Weighted mean token entropy, for logging (a 0-d tensor on the device; NaN when no token has weight)."""
    total = weights.sum()
    return torch.where(total > 0, (weights * entropy).sum() / total, torch.full_like(total, math.nan))
