"""PeekRead, the behaviour-cost task: its instance generator and its reference solver.

Every step the agent chooses what it looks at: ``PEEK`` returns a short observation, ``READ`` a long
one. How much context a rollout consumes, and so how often it compacts, is then a consequence of what
it did, and it differs between the G rollouts of one prompt. ``read_payoff`` sets how that cost relates
to success (see :class:`simlab.tasks.config.PeekReadConfig`): reading is the informative path (> 0), a
hazard that can break the episode (< 0), or neither (0, the control).

Bursts and the coupling are drawn per rollout (``core.rollout_keys``): the G rollouts of one prompt share
the fact and the question, but a read at the fact step may burst in one of them and not in another, and
the coupling decides, per rollout, whether the read shows the fact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simlab.tasks import core, vocab
from simlab.tasks.config import PeekReadConfig
from simlab.tasks.core import IntArray, KeyArray
from simlab.tasks.keyrecall import FactSolver

PEEK = vocab.FIRST_CONTENT
"""The cheap action: a short observation."""
READ = vocab.FIRST_CONTENT + 1
"""The costly action: a long observation (``read_tokens``)."""
READ_PROB = 0.5
"""The scripted agent's chance of reading when no earlier action of its own is in context."""


def key_tokens(cfg: PeekReadConfig) -> tuple[int, int]:
    """[first, stop) ids of the keys: the lower half of the content ids after the two actions."""
    first = vocab.FIRST_CONTENT + 2
    return first, first + (cfg.vocab_size - first) // 2


def value_tokens(cfg: PeekReadConfig) -> tuple[int, int]:
    """[first, stop) ids of the values: the rest of the content ids."""
    return key_tokens(cfg)[1], cfg.vocab_size


def prompt_tokens(cfg: PeekReadConfig) -> list[int]:
    """The prompt: ``TASK`` alone."""
    return [vocab.TASK]  # nothing tells the agent what reading is worth: it has to find out


def _filler(keys: KeyArray, stream: int, lengths: IntArray, width: int, cfg: PeekReadConfig) -> IntArray:
    """(n, H, width) distractor tokens, PAD beyond each step's length; never a key, so no fake fact."""
    h = lengths.shape[1]
    v0, v1 = value_tokens(cfg)
    out = core.small_ints(keys, stream, (h, width), v0, v1)
    out[np.arange(width)[None, None, :] >= lengths[:, :, None]] = vocab.PAD
    return out


def _state_fact(obs: IntArray, rows: IntArray, steps: IntArray, key: IntArray, value: IntArray) -> None:
    """Open the observation of step ``steps`` of ``rows`` with ``FACT key value``, in place."""
    obs[rows, steps, 0] = vocab.FACT
    obs[rows, steps, 1] = key
    obs[rows, steps, 2] = value


def _rollout_draws(rollouts: KeyArray, cfg: PeekReadConfig) -> tuple[core.BoolArray, core.BoolArray]:
    """(burst, lost) per rollout from the rollout stream (streams 0-1): whether a read at the fact step
    bursts, and whether that read loses the fact (``coupling``: burst reads for c > 0, others for c < 0)."""
    burst = core.uniform(rollouts, 0, ()) < cfg.burst_prob
    u = core.uniform(rollouts, 1, ())
    c = cfg.coupling
    lost = (burst & (u < c)) if c > 0 else (~burst & (u < -c))
    return burst, lost


def _restate_in_reads(read: IntArray, fact: _Fact, lay: core.Layout) -> None:
    """Open every read after the fact step (the query's excepted) with the fact, where it is shown at all."""
    t = np.arange(read.shape[1])[None, :]
    after = (t > fact.step[:, None]) & (t < lay.horizon[:, None] - 1) & fact.shown[:, None]
    rows, steps = np.nonzero(after)
    _state_fact(read, rows, steps, fact.key[rows], fact.value[rows])


Bursts = tuple[IntArray, core.BoolArray, IntArray]
"""``Instances.arm_step``, ``burst`` and ``burst_obs``."""


@dataclass(frozen=True)
class _Fact:
    """Where and what the fact is, per instance."""

    step: IntArray
    key: IntArray
    value: IntArray
    shown: core.BoolArray
    """Stated at all (not a hard instance)."""


def _burst_arrays(rollouts: KeyArray, burst: core.BoolArray, restated: core.BoolArray, fact: _Fact,
                  lay: core.Layout, cfg: PeekReadConfig) -> Bursts:
    """The arming step (the fact step, -1 without a burst), the burst steps and their observations (stream 2):
    ``burst_steps`` long ones, then (``burst_restates``) a short one that opens with the fact where
    ``restated``; all cut short before the query."""
    h = cfg.horizon[1]
    t, f, last = np.arange(h)[None, :], fact.step[:, None], lay.horizon[:, None] - 1
    long = (t > f) & (t <= f + cfg.burst_steps) & (t < last)
    obs = _filler(rollouts, 2, np.where(long, cfg.burst_tokens, lay.lengths), lay.width, cfg)
    steps = long
    if cfg.burst_restates:
        after = (t == f + cfg.burst_steps + 1) & (t < last)
        steps = long | after
        rows, cols = np.nonzero(after & restated[:, None])
        _state_fact(obs, rows, cols, fact.key[rows], fact.value[rows])
    return np.where(burst, fact.step, -1), steps, obs


def _per_rollout(keys: KeyArray, rollouts: KeyArray | None, fact: _Fact, lay: core.Layout,
                 cfg: PeekReadConfig) -> tuple[core.BoolArray, Bursts | None]:
    """Whether each rollout's read at the fact step shows the fact, and its bursts (``None``: bursts off).
    With the knobs off nothing is drawn, so the instances are those drawn before the knobs existed."""
    if cfg.burst_prob == 0 and cfg.coupling == 0:
        return fact.shown, None
    r = rollouts if rollouts is not None else core.rollout_keys(keys, np.zeros(keys.size, dtype=np.int64))
    burst, lost = _rollout_draws(r, cfg)
    shown = fact.shown & ~lost
    return shown, (_burst_arrays(r, burst, shown, fact, lay, cfg) if cfg.burst_prob > 0 else None)


def generate(keys: KeyArray, cfg: PeekReadConfig, rollouts: KeyArray | None = None) -> core.Instances:
    """Lay out one PeekRead episode per key (streams 10-17; 0-5 are the common layout), and what differs
    between the rollouts of one episode from ``rollouts`` (default: rollout 0 of each).

    The fact opens the observation of its step, so keeping it is a positional copy a small policy can
    learn; what varies is whether the agent's route shows it (``read_payoff`` > 0), whether its
    route survives the traps (< 0), and, per rollout, whether a read there bursts or loses the fact.
    """
    n, h, p = keys.size, cfg.horizon[1], cfg.read_payoff
    prompt = prompt_tokens(cfg)
    lay = core.draw_layout(keys, cfg, len(prompt))
    rows = np.arange(n)
    k0, k1 = key_tokens(cfg)
    v0, v1 = value_tokens(cfg)

    peek = _filler(keys, 10, lay.lengths, lay.width, cfg)
    read = _filler(keys, 11, core.randint(keys, 12, (h,), cfg.read_tokens[0], cfg.read_tokens[1] + 1), lay.width, cfg)

    limit = np.clip(np.floor(cfg.fact_frac * lay.horizon).astype(np.int64), 1, lay.horizon - 1)
    fact = _Fact(step=core.randint(keys, 13, (), 0, limit), key=core.randint(keys, 14, (), k0, k1),
                 value=core.randint(keys, 15, (), v0, v1), shown=~lay.hard)
    in_peek = fact.shown & ((p <= 0) | (core.uniform(keys, 16, ()) >= p))
    _state_fact(peek, rows[in_peek], fact.step[in_peek], fact.key[in_peek], fact.value[in_peek])
    in_read, bursts = _per_rollout(keys, rollouts, fact, lay, cfg)
    _state_fact(read, rows[in_read], fact.step[in_read], fact.key[in_read], fact.value[in_read])
    if cfg.reread:
        _restate_in_reads(read, fact, lay)

    expected = np.full((n, h), core.ANY_ACTION, dtype=np.int64)
    if p < 0:  # traps: a read at such a step breaks the episode
        t = np.arange(h)[None, :]
        trap = (t > fact.step[:, None]) & (t < lay.horizon[:, None] - 1) & (core.uniform(keys, 17, (h,)) < -p)
        expected[trap] = PEEK

    last = lay.horizon - 1
    qlen = lay.lengths[rows, last]
    peek[rows, last, qlen - 2] = fact.key
    peek[rows, last, qlen - 1] = vocab.QUERY
    read[rows, last] = peek[rows, last]  # the query is the same whatever the last action was

    arm_step, burst, burst_obs = bursts if bursts is not None else (None, None, None)
    return lay.instances(prompt=np.tile(np.asarray(prompt, dtype=np.int64), (n, 1)), obs=peek, expected=expected,
                         answer=fact.value, target=fact.key, alt_obs=read, alt_action=np.full(n, READ, dtype=np.int64),
                         arm_step=arm_step, burst=burst, burst_obs=burst_obs)


class PeekReadSolver(FactSolver):
    """How a reference agent plays PeekRead from its working context alone.

    Facts and answers as in KeyRecall. The scripted agent's route is sticky: it repeats the last action
    of its own still in context, and flips a coin (``READ_PROB``) when none is, so its rollouts split
    into readers and skimmers. The oracle reads only while the fact it will be asked is unknown and
    reading can reveal it, and peeks otherwise, so it is never trapped. A summary is ``m // 2``
    (key, value) pairs; with one fact per instance the scripted agent's quality q does not matter here.
    """

    def __init__(self, cfg: PeekReadConfig) -> None:
        super().__init__(key_tokens(cfg), value_tokens(cfg))
        self.cfg = cfg

    def act(self, ctx: IntArray, rng: np.random.Generator) -> int:
        """The last action in the context again (a sticky route), else a coin between peek and read."""
        acts = np.flatnonzero(ctx[:-1] == vocab.ACT)
        if acts.size and int(ctx[acts[-1] + 1]) in (PEEK, READ):
            return int(ctx[acts[-1] + 1])
        return READ if rng.random() < READ_PROB else PEEK

    def oracle_act(self, ctx: IntArray, target: int, rng: np.random.Generator) -> int:
        """Read while the asked fact is unknown and a read can show it (reading pays, or reads restate it);
        peek otherwise."""
        shows = self.cfg.read_payoff > 0 or self.cfg.reread
        return READ if shows and target not in self.facts(ctx) else PEEK

    def summarise(self, ctx: IntArray, m: int, mode: str, target: int, rng: np.random.Generator) -> IntArray:
        """``m`` tokens: the known facts (the asked one first for ``oracle``, newest first otherwise), PAD-filled."""
        known = self.facts(ctx)
        chosen = sorted(known, key=lambda k: k != target) if mode == "oracle" else list(known)[::-1]
        out = np.full(m, vocab.PAD, dtype=np.int64)
        for i, k in enumerate(chosen[: m // 2]):
            out[2 * i : 2 * i + 2] = (k, known[k])
        return out
