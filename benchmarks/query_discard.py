"""How often the oracle must answer without seeing the question: the query's step lost to compaction.

Every simlab task ends its last observation with ``QUERY`` (KeyRecall and PeekRead put the asked key
just before it). If that step pushes the context over L, SUPO's discard rule (``harness.discard``) cuts
it before the summary (:func:`simlab.harness.compact._before_summary`); it comes back only as the newest
tail step, when ``harness.tail_steps >= 1`` and it fits. Without the discard rule the step is summarised,
and with ``tail_steps = 0`` it is gone as well. The answer turn then sees no ``QUERY``.

Per preset, the run config is resolved as the trainer resolves it (``simlab.config.resolve``: preset <
recipe < ``--set``; SUPO by default, plus the preset's own ``train.recipe`` where it sets one), and the
``oracle`` reference agent plays ``--episodes`` held-out-style episodes (``group_size = 1``, instance seeds
from ``--seed``) on the run's task through the real harness (``simlab.harness.run_rollouts``), writing
its own summaries as the run's ``harness.summariser`` says. A thin wrapper around the oracle records each
request; nothing in simlab changes. Columns:

- ``cut``: answered episodes whose query step was compacted (the answer request is in a later segment
  than the action that brought the query: under the discard rule that step was cut before the summary);
- ``lost``: answered episodes whose answer context holds no ``QUERY`` (share of answered episodes ± SE);
- ``succ q`` / ``succ no-q``: oracle success (reward >= 1) with and without the query in the answer
  context; ``succ``: over all episodes (overlong ones count as failures);
- ``cost``: success points the lost queries cost, lost / N x (succ q - succ no-q).

``--agent scripted`` plays the scripted agent instead (its route choice differs from the oracle's).

Run (about 30 s per table on one core)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/query_discard.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/query_discard.py --set harness.discard=false
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simlab.config import RunConfig, TrainConfig, apply_overrides, parse_overrides, resolve
from simlab.harness import Agent, Generation, Phase, Request, make_agent, run_rollouts
from simlab.harness.triggers import TRIGGERS
from simlab.summarisers import summariser_for
from simlab.tasks import vocab
from simlab.tasks.presets import PRESETS
from simlab.train.rollouts import make_env


@dataclass
class Recorder:
    """Passes every request to ``agent`` and notes, per env, the segment of its last action and its answer."""

    agent: Agent
    n: int
    act_segment: np.ndarray = field(init=False)
    answer_segment: np.ndarray = field(init=False)
    answer_has_query: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.act_segment = np.full(self.n, -1, dtype=np.int64)
        self.answer_segment = np.full(self.n, -1, dtype=np.int64)
        self.answer_has_query = np.zeros(self.n, dtype=np.bool_)

    def generate(self, request: Request) -> Generation:
        """The wrapped agent's tokens; records the ACT and ANSWER requests' segments and contexts."""
        seg = request.segment_ids if request.segment_ids is not None else np.zeros(len(request.env_ids), np.int64)
        if request.phase == Phase.ACT:
            self.act_segment[request.env_ids] = seg
        elif request.phase == Phase.ANSWER:
            self.answer_segment[request.env_ids] = seg
            self.answer_has_query[request.env_ids] = [bool((c == vocab.QUERY).any()) for c in request.contexts]
        return self.agent.generate(request)


@dataclass(frozen=True)
class Row:
    """One preset under one resolved run config."""

    preset: str
    recipe: str
    window: int
    limit: int
    tail: int
    discard: bool
    episodes: int
    answered: int
    cut: int
    lost: int
    success: float
    success_query: float
    success_lost: float

    @property
    def share(self) -> float:
        """Share of answered episodes whose answer context lacks the query."""
        return self.lost / self.answered if self.answered else math.nan

    @property
    def se(self) -> float:
        """Binomial standard error of :attr:`share`."""
        p = self.share
        return math.sqrt(p * (1 - p) / self.answered) if self.answered else math.nan

    @property
    def cost(self) -> float:
        """Success the lost queries cost: their share of all episodes x (success with - without the query)."""
        return self.lost / self.episodes * (self.success_query - self.success_lost) if self.lost else 0.0


def measure(cfg: RunConfig, recipe: str, episodes: int, seed: int, agent: str = "oracle") -> Row:
    """Play ``episodes`` episodes of the reference ``agent`` on ``cfg``'s task and harness; count lost queries."""
    env = make_env(cfg, episodes)
    try:
        rec = Recorder(make_agent(agent, env, seed=seed, quality=cfg.base.quality), episodes)
        frozen = summariser_for(cfg.harness.summariser)(cfg, env, seed=seed + 7, base_path=None)
        rb = run_rollouts(env, rec, cfg.harness, seed=seed, group_size=1, summariser=frozen)
    finally:
        env.close()
    won = np.array([r.reward >= 1.0 for r in rb.rollouts])
    answered = rec.answer_segment >= 0
    cut = answered & (rec.answer_segment != rec.act_segment)
    lost = answered & ~rec.answer_has_query
    h = cfg.harness
    trig = TRIGGERS.get(h.trigger)
    return Row(
        preset=cfg.preset, recipe=recipe, window=h.window, limit=trig.limit(h) if trig.length_based else h.window,
        tail=h.tail_steps, discard=h.discard and trig.length_based and trig.kind == "summary",
        episodes=episodes, answered=int(answered.sum()), cut=int(cut.sum()), lost=int(lost.sum()),
        success=float(won.mean()), success_query=_mean(won[answered & ~lost]), success_lost=_mean(won[lost]),
    )


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if x.size else math.nan


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}"


def table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table (percentages)."""
    head = ("preset", "recipe", "W", "L", "k", "discard", "N", "answered", "cut", "lost", "lost % ± SE",
            "succ q %", "succ no-q %", "succ %", "cost pts")
    body = [(r.preset, r.recipe, str(r.window), str(r.limit), str(r.tail), "yes" if r.discard else "no",
             str(r.episodes), str(r.answered), str(r.cut), str(r.lost),
             "-" if math.isnan(r.share) else f"{100 * r.share:.1f} ± {100 * r.se:.1f}",
             _pct(r.success_query), _pct(r.success_lost), _pct(r.success), _pct(r.cost)) for r in rows]
    widths = [max(len(line[c]) for line in (head, *body)) for c in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)) for line in (head, *body))


def main() -> None:
    """Measure every preset with a QUERY-ending task (all of them) and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0, help="first instance seed (fixed)")
    ap.add_argument("--agent", default="oracle", help="reference agent: oracle or scripted")
    ap.add_argument("--recipe", default=TrainConfig.default("recipe"), help="the recipe every preset is measured under")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="run-config override")
    ap.add_argument("--preset", action="append", default=None, help="only these presets (default: all)")
    args = ap.parse_args()
    overrides = parse_overrides(args.set)
    rows = []
    for name in args.preset or list(PRESETS):
        own = PRESETS[name].train.get("recipe")  # none of today's presets sets one: the trainer's default applies
        for recipe in dict.fromkeys([args.recipe, *([own] if own else [])]):
            nested: dict[str, Any] = {"task": {"preset": name}, "train": {"recipe": recipe}}
            cfg = resolve(apply_overrides(nested, overrides))
            rows.append(measure(cfg, recipe, args.episodes, args.seed, args.agent))
            print(f"# {name} ({recipe}) done", flush=True)
    print(f"{args.agent}, {args.episodes} episodes per row, seed {args.seed}, overrides {overrides or 'none'}")
    print(table(rows))


if __name__ == "__main__":
    main()
