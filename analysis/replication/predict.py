"""Predict before running: the expected policy gradient of a one-decision route model, per credit choice.

A credit finding's mechanism acts on one decision: which route a rollout takes at its first step (PeekRead's
READ or PEEK). A :class:`RouteModel` lists, per route, the kinds of rollout it produces (a burst or not),
each with its probability, its segment count K, the optimised tokens in the segment that holds the
decision and in the whole rollout, its success probability and its overlong probability. Monte Carlo
batches of ``prompts x G`` such rollouts go through simlab's own credit layer (the registered estimators
and normalisers), and the decision token's advantage times its loss weight gives the expected gradient
on the route logits:

    g_a = E[ sum_i w_i A_i (1{route_i = a} - pi_a) ]        (softmax policy over routes, pi)

A GAE estimator reads a critic; the model's critic values every token at the policy's mean reward, so the
estimators differ only in how far the terminal reward's credit travels back to the decision: (gamma
lambda)^(tokens after it) over the whole rollout (``gae_concat``, and ``gae_compaction``'s reward term),
(gamma lambda)^(tokens after it in its own segment) for ``gae_segment_local``.

Its sign says where the policy goes (a normaliser whose g_READ is negative drives the policy to PEEK even
when READ pays more: a flip that survives convergence, so it shows in final success); a ratio of
magnitudes between two choices that agree in sign says how much faster one learns (a speed effect, seen
in the area under the learning curve, not in final success). ``docs/findings.md`` commits these
predictions with each spec before its runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from simlab import credit
from simlab.segments import SegmentBatch


@dataclass(frozen=True)
class Kind:
    """One kind of rollout a route produces."""

    prob: float
    """Probability of this kind given the route."""
    segments: tuple[int, ...]
    """Optimised tokens of each segment, in order; the decision is token 0 of the first."""
    success: float
    """P(reward 1 | this kind, finished)."""
    overlong: float = 0.0
    """P(the rollout ends overlong: reward 0, ``finished`` False)."""


@dataclass(frozen=True)
class RouteModel:
    """Routes -> the kinds of rollout each produces."""

    routes: dict[str, tuple[Kind, ...]]

    def __post_init__(self) -> None:
        for name, kinds in self.routes.items():
            total = sum(k.prob for k in kinds)
            if not np.isclose(total, 1.0):
                raise ValueError(f"route {name!r}: kind probabilities sum to {total}; choose ones that sum to 1")

    @property
    def names(self) -> list[str]:
        """The routes, in order."""
        return list(self.routes)

    def mean_success(self, route: str) -> float:
        """E[R | route], overlong rollouts counted as failures."""
        return float(sum(k.prob * (1 - k.overlong) * k.success for k in self.routes[route]))


@dataclass(frozen=True)
class Choice:
    """A credit-assignment choice: an estimator, a normaliser, its per-row weight, the overlong mask and a
    per-segment cost on the reward (``cost``, ``cost_coef``, ``cost_on``: ``train.cost``), as the trainer reads
    them."""

    estimator: str = "rollout_group"
    normaliser: str = "token"
    overlong_mask: bool = True
    row_weight: str = "none"
    cost: str = "none"
    cost_coef: float = 0.0
    cost_on: str = "all"
    options: dict[str, Any] = field(default_factory=dict)


def _draw(model: RouteModel, policy: npt.NDArray[np.float64], n: int, rng: np.random.Generator
          ) -> tuple[list[tuple[int, ...]], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """n rollouts: their segments, route index, reward and finished flag."""
    names = model.names
    route = rng.choice(len(names), size=n, p=policy)
    segments: list[tuple[int, ...]] = []
    reward = np.zeros(n)
    finished = np.ones(n, dtype=bool)
    u, v, w = rng.random(n), rng.random(n), rng.random(n)
    for i in range(n):
        kinds = model.routes[names[route[i]]]
        cum = np.cumsum([k.prob for k in kinds])
        kind = kinds[min(int(np.searchsorted(cum, u[i], side="right")), len(kinds) - 1)]
        segments.append(kind.segments)
        finished[i] = v[i] >= kind.overlong
        reward[i] = float(finished[i] and w[i] < kind.success)
    return segments, route, reward, finished


def expected_gradient(model: RouteModel, choice: Choice, policy: dict[str, float], *, group_size: int = 8,
                      prompts: int = 32, batches: int = 200, seed: int = 0) -> dict[str, float]:
    """E[g_a] per route at the given route probabilities (Monte Carlo over ``batches`` batches of
    ``prompts x group_size`` rollouts; the same seed gives the same draws for every choice, so two
    choices are compared on common random numbers)."""
    pi = np.array([policy[r] for r in model.names], dtype=np.float64)
    rng = np.random.default_rng(seed)
    total = np.zeros(len(pi))
    n = prompts * group_size
    groups = np.repeat(np.arange(prompts), group_size).tolist()
    critic = credit.estimator_family(choice.estimator) == "gae"
    v0 = float(sum(p * model.mean_success(r) for p, r in zip(pi, model.names, strict=True)))
    for _ in range(batches):
        segments, route, reward, finished = _draw(model, pi, n, rng)
        # a GAE estimator reads a critic: here one that knows the policy's mean reward and nothing else
        values = [[np.full(t, v0) for t in segs] for segs in segments] if critic else None
        batch = SegmentBatch.from_rollouts(segments, reward.tolist(), groups=groups, finished=finished.tolist(),
                                           values=values)
        batch = credit.with_cost(batch, choice.cost, coef=choice.cost_coef, on=choice.cost_on)
        adv = credit.estimate(batch, choice.estimator, **choice.options).advantages
        weights = credit.loss_weights(batch, choice.normaliser, overlong_mask=choice.overlong_mask,
                                      row_weight=choice.row_weight)
        rows = np.flatnonzero(batch.seg_position == 0)  # the first segment of each rollout, in rollout order
        contrib = weights[rows, 0] * adv[rows, 0]
        onehot = np.eye(len(pi))[route]
        total += (contrib[:, None] * (onehot - pi[None, :])).sum(axis=0)
    return dict(zip(model.names, (total / batches).tolist(), strict=True))
