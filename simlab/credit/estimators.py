"""Advantage estimators: one named function per published way of crediting a segmented rollout.

Each estimator maps a :class:`SegmentBatch` to token advantages of shape ``(num_segments, max_tokens)``
(0 on padding and dummy rows) and, for the GAE family, value targets for the critic. No estimator
whitens or normalises the loss; whitening is :func:`simlab.credit.whiten`, reduction is
:mod:`simlab.credit.normalisers`.

Group estimators (GRPO family), for rollout r in prompt group g with G_g rollouts:
    rollout_group     A_r = (R_r - mean_g(R)) / (std_g(R) + eps)                  SUPO eq. (3), ReSum
    trajectory_group  same, mean/std over R repeated once per segment (K_r times)   SUPO eq. (4), ablated
Which rollouts of a group enter mean_g and std_g is the ``baseline`` option (``BASELINES``): ``all``, or
``finished`` (invalid, overlong rollouts out of the baseline, NeMo-RL PR #4078).
GAE family (PPO with a critic):
    gae_concat        GAE over the rollout's tokens concatenated across segments (the reference)
    gae_segment_local GAE inside each segment, reward on its last token, V = 0 after it
    gae_compaction    gae_segment_local * (gamma * lam_s) ** N_after(s)            CompactionRL eq. (14)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simlab.arrays import BoolArray, FloatArray
from simlab.credit import kernels
from simlab.credit.lambdas import check_gamma, segment_lambdas
from simlab.errors import ConfigError
from simlab.registry import Registry
from simlab.rules import NonNegative, check_value
from simlab.segments import SegmentBatch


@dataclass(frozen=True)
class Estimate:
    """What an estimator returns."""

    advantages: FloatArray
    """(S, max_tokens) token advantages, 0 on padding."""
    value_targets: FloatArray | None = None
    """(S, max_tokens) critic regression targets (GAE family), 0 on padding; None for group estimators."""
    family: str = "group"
    """"group" (needs groups of G rollouts) or "gae" (needs critic values)."""


Estimator = Callable[..., Estimate]
ESTIMATORS: Registry[Estimator] = Registry("estimator")
FAMILIES: dict[str, str] = {}
"""Canonical estimator name -> its family: ``gae`` (reads critic values) or ``group`` (group statistics)."""


def register_estimator(name: str, family: str) -> Callable[[Estimator], Estimator]:
    """Register an estimator under ``name`` with its family (:data:`FAMILIES`)."""
    FAMILIES[name] = family
    return ESTIMATORS.register(name)


Baseline = Callable[[SegmentBatch], BoolArray]
"""(batch) -> (R,) the rollouts that enter their group's mean and std."""
BASELINES: Registry[Baseline] = Registry("baseline")


@BASELINES.register("all")
def all_rollouts(batch: SegmentBatch) -> BoolArray:
    """b_r = 1: every rollout of the group enters mean_g and std_g (GRPO; verl, slime, SkyRL)."""
    return np.ones(batch.num_rollouts, dtype=np.bool_)


@BASELINES.register("finished")
def finished_rollouts(batch: SegmentBatch) -> BoolArray:
    """b_r = finished_r: only rollouts that answered enter mean_g and std_g (NeMo-RL PR #4078, "invalid
    rollouts are excluded from the logical baseline"); an overlong rollout is still scored against them."""
    return batch.finished.copy()


# ---------------------------------------------------------------------- group-relative (GRPO family)
def _group_advantage(
    batch: SegmentBatch,
    weight: FloatArray,
    *,
    std_normalize: bool,
    eps: float,
    unbiased_std: bool,
) -> FloatArray:
    """(R,) per-rollout advantage against a weighted group baseline.

    weight_r is how many times rollout r enters its group's statistics (1: per rollout; K_r: per segment;
    0: left out of the baseline).
    """
    check_value("eps", eps, NonNegative)
    g, rewards, ng = batch.groups, batch.rewards, batch.num_groups
    rollouts = np.bincount(g, weights=(weight > 0).astype(np.float64), minlength=ng)  # rollouts in the baseline
    count = np.maximum(np.bincount(g, weights=weight, minlength=ng), 1e-300)
    mean = np.bincount(g, weights=weight * rewards, minlength=ng) / count
    centred = rewards - mean[g]  # R - mean
    adv = centred
    if std_normalize:
        ddof = 1.0 if unbiased_std else 0.0
        var = np.bincount(g, weights=weight * centred**2, minlength=ng) / np.maximum(count - ddof, 1.0)
        adv = centred / (np.sqrt(var)[g] + eps)  # (R - mean) / (std + eps)
    # A group with fewer than two rollouts in its baseline has none. verl returns the raw reward there; we return 0.
    return np.where(rollouts[g] >= 2, adv, 0.0)


def _baseline_weight(batch: SegmentBatch, baseline: str) -> FloatArray:
    """(R,) 1 for the rollouts that enter the group statistics under ``baseline``, else 0."""
    return BASELINES.get(baseline, "baseline")(batch).astype(np.float64)


@register_estimator("rollout_group", "group")
def rollout_group(
    batch: SegmentBatch,
    *,
    std_normalize: bool = True,
    eps: float = 1e-6,
    unbiased_std: bool = False,
    baseline: str = "all",
) -> Estimate:
    """Group-relative advantage over the G rollouts of a prompt, broadcast to every token of every segment.

    A_r = (R_r - mean_{r' in g} R_r') / (std_{r' in g} R_r' + eps)        (SUPO eq. 3; ReSum-GRPO broadcast)

    Options:
        std_normalize: False gives A_r = R_r - mean (Dr. GRPO).
        eps: added to the std (default 1e-6).
        unbiased_std: True uses ddof=1 as verl's ``torch.std`` does; default is the population std.
        baseline: which rollouts enter mean and std, a name in ``BASELINES`` (``all``, ``finished``).

    A group with fewer than two rollouts in its baseline gets advantage 0 (no baseline exists); verl
    returns the raw reward there. Shapes: batch (S rows, W tokens) -> advantages (S, W).
    """
    adv = _group_advantage(
        batch, _baseline_weight(batch, baseline), std_normalize=std_normalize, eps=eps, unbiased_std=unbiased_std
    )
    return Estimate(batch.broadcast(batch.per_row(adv)))


@register_estimator("trajectory_group", "group")
def trajectory_group(
    batch: SegmentBatch,
    *,
    std_normalize: bool = True,
    eps: float = 1e-6,
    unbiased_std: bool = False,
    baseline: str = "all",
) -> Estimate:
    """Group-relative advantage with each rollout's reward counted once per segment (SUPO's ablated eq. 4).

    A_r = (R_r - mean_{s in g} R_{r(s)}) / (std_{s in g} R_{r(s)} + eps),  s over the group's segments

    This is what a GRPO trainer computes when segments are handed to it as independent samples: rollouts
    that compacted more pull the baseline (seed Block 1: +0.3 shift, advantages -2 / +0.5 instead of +-1).
    Options as :func:`rollout_group`; a group with fewer than two rollouts in its baseline gets 0.
    """
    weight = batch.segments_per_rollout.astype(np.float64) * _baseline_weight(batch, baseline)
    adv = _group_advantage(batch, weight, std_normalize=std_normalize, eps=eps, unbiased_std=unbiased_std)
    return Estimate(batch.broadcast(batch.per_row(adv)))


# ---------------------------------------------------------------------- GAE family (critic)
def _gae(
    batch: SegmentBatch,
    who: str,
    *,
    gamma: float,
    lam: float | str,
    alpha: float | None,
    response_cap: float | None,
    concat: bool,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(advantages, values, per-row gamma*lam) for a GAE pass over the batch."""
    values = batch.require_values(who)
    gamma = check_gamma(gamma)
    gl = gamma * segment_lambdas(batch, lam, alpha=alpha, response_cap=response_cap)
    adv = kernels.gae(values, batch.seg_tokens, batch.seg_rollout, batch.rewards, gamma, gl, concat)
    return adv, values, gl


@register_estimator("gae_concat", "gae")
def gae_concat(
    batch: SegmentBatch,
    *,
    gamma: float = 1.0,
    lam: float | str = 0.95,
    alpha: float | None = None,
    response_cap: float | None = None,
) -> Estimate:
    """GAE over the rollout as one uninterrupted trajectory: the reference only a simulator can compute.

    delta_t = r_t + gamma * V_{t+1} - V_t,   r_t = R on the rollout's final token, else 0
    A_t     = delta_t + gamma * lam_{s(t)} * A_{t+1}                   (Schulman et al. 2016, eq. 16)

    V and A are bootstrapped across segment boundaries; V = 0 after the final token. With a per-segment
    lambda, token t uses the lambda of its own segment.  Value targets: A + V.
    Shapes: batch with values (S, W) -> advantages, value_targets (S, W).
    """
    adv, values, _ = _gae(
        batch, "gae_concat", gamma=gamma, lam=lam, alpha=alpha, response_cap=response_cap, concat=True
    )
    return Estimate(adv, kernels.add_rows(adv, values, batch.seg_tokens), family="gae")


@register_estimator("gae_segment_local", "gae")
def gae_segment_local(
    batch: SegmentBatch,
    *,
    gamma: float = 1.0,
    lam: float | str = 0.95,
    alpha: float | None = None,
    response_cap: float | None = None,
) -> Estimate:
    """GAE inside each segment as if it were its own trajectory.

    delta_t = r_t + gamma * V_{t+1} - V_t,   r_t = R on the segment's last token, V = 0 after it
    A_t     = delta_t + gamma * lam_s * A_{t+1}

    Over-credits early segments by (gamma*lam)^-N_after (seed Block 2: 1.441x on 18 tokens).
    Value targets: local A + V.
    """
    adv, values, _ = _gae(
        batch, "gae_segment_local", gamma=gamma, lam=lam, alpha=alpha, response_cap=response_cap, concat=False
    )
    return Estimate(adv, kernels.add_rows(adv, values, batch.seg_tokens), family="gae")


@register_estimator("gae_compaction", "gae")
def gae_compaction(
    batch: SegmentBatch,
    *,
    gamma: float = 1.0,
    lam: float | str = 0.95,
    alpha: float | None = None,
    response_cap: float | None = None,
) -> Estimate:
    """Segment-local GAE with CompactionRL's cross-trajectory discount correction.

    A_t = A^local_t * (gamma * lam_s) ** N_after(s)                     (CompactionRL eq. 14)

    N_after(s) counts optimised tokens generated after segment s in its rollout; lam_s is the lambda of
    the segment being corrected. With a constant lambda the reward coefficient equals gae_concat's
    exactly; the value terms keep a bootstrapping residual on every pre-final segment (seed Block 2).
    Value targets: the local return, A^local + V, as CompactionRL keeps it.
    """
    local, values, gl = _gae(
        batch, "gae_compaction", gamma=gamma, lam=lam, alpha=alpha, response_cap=response_cap, concat=False
    )
    targets = kernels.add_rows(local, values, batch.seg_tokens)
    kernels.scale_rows(local, batch.seg_tokens, gl**batch.n_after)  # * (gamma*lam_s)^N_after(s)
    return Estimate(local, targets, family="gae")


# ---------------------------------------------------------------------- public entry points
def check_options(kind: str, name: str, fn: Callable[..., Any], options: dict[str, Any]) -> None:
    """Raise a ConfigError naming an option the component does not take, and listing the ones it does."""
    accepted = tuple(p for p in inspect.signature(fn).parameters if p not in ("batch", "kept"))
    for key in options:
        if key not in accepted:
            raise ConfigError(f"{kind} {name!r} has no option {key!r}; it takes {accepted}")


def estimate(batch: SegmentBatch, name: str, **options: Any) -> Estimate:
    """Run the estimator registered as ``name`` with keyword ``options``."""
    fn = ESTIMATORS.get(name)
    check_options("estimator", name, fn, options)
    return fn(batch, **options)


def advantages(batch: SegmentBatch, name: str, **options: Any) -> FloatArray:
    """(num_segments, max_tokens) token advantages from estimator ``name``; 0 on padding."""
    return estimate(batch, name, **options).advantages


def value_targets(batch: SegmentBatch, name: str, **options: Any) -> FloatArray:
    """(num_segments, max_tokens) critic targets from a GAE estimator; group estimators have none."""
    est = estimate(batch, name, **options)
    if est.value_targets is None:
        raise ConfigError(
            f"estimator {name!r} produces no value targets; use one of "
            f"{estimators_of('gae')}"
        )
    return est.value_targets


def estimator_family(name: str) -> str:
    """The family of an estimator: ``gae`` when it needs critic values, ``group`` otherwise."""
    name = ESTIMATORS.canonical(name)
    if name not in FAMILIES:
        raise ValueError(f"estimator {name!r} was registered without a family; register it with "
                         "simlab.credit.estimators.register_estimator(name, 'group' | 'gae')")
    return FAMILIES[name]


def estimators_of(family: str) -> list[str]:
    """The registered estimators of ``family`` (``gae`` or ``group``), in registration order."""
    return [n for n in ESTIMATORS.names() if FAMILIES.get(n) == family]


def whiten(adv: FloatArray, mask: np.ndarray, *, shift_mean: bool = True, eps: float = 1e-8) -> FloatArray:
    """Batch-level masked whitening of token advantages (verl ``masked_whiten``); 0 stays on padding.

    A' = (A - mean_masked(A)) / sqrt(var_masked(A) + eps)    (mean added back when shift_mean=False)
    """
    m = np.asarray(mask, dtype=bool)
    n = int(m.sum())
    if n == 0:
        return np.zeros_like(adv)
    real = adv[m]
    mean = real.mean()
    var = real.var(ddof=1) if n > 1 else 0.0  # verl's masked_var is unbiased
    out = np.zeros_like(adv)
    white = (real - mean) / np.sqrt(var + eps)
    out[m] = white if shift_mean else white + mean
    return out


__all__ = [
    "BASELINES",
    "ESTIMATORS",
    "Estimate",
    "advantages",
    "estimate",
    "estimator_family",
    "value_targets",
    "whiten",
]
