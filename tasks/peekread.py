"""PeekRead, the behaviour-cost task: its instance generator and its reference solver.

Every step the agent chooses what it looks at: ``PEEK`` returns a short observation, ``READ`` a long
one. How much context a rollout consumes, and so how often it compacts, is then a consequence of what
it did, and it differs between the G rollouts of one prompt. ``read_payoff`` sets how that cost relates
to success (see :class:`simlab.tasks.config.PeekReadConfig`): reading is the informative path (> 0), a
hazard that can break the episode (< 0), or neither (0, the control).
"""

from __future__ import annotations

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


def generate(keys: KeyArray, cfg: PeekReadConfig) -> core.Instances:
    """Lay out one PeekRead episode per key (streams 10-17; 0-5 are the common layout).

    The fact opens the observation of its step, so keeping it is a positional copy a small policy can
    learn; what varies is whether the agent's route shows it (``read_payoff`` > 0) and whether its
    route survives the traps (< 0).
    """
    n, h, p = keys.size, cfg.horizon[1], cfg.read_payoff
    prompt = prompt_tokens(cfg)
    lay = core.draw_layout(keys, cfg, len(prompt))
    width = lay.width
    rows = np.arange(n)
    k0, k1 = key_tokens(cfg)
    v0, v1 = value_tokens(cfg)

    peek = _filler(keys, 10, lay.lengths, width, cfg)
    read = _filler(keys, 11, core.randint(keys, 12, (h,), cfg.read_tokens[0], cfg.read_tokens[1] + 1), width, cfg)

    limit = np.clip(np.floor(cfg.fact_frac * lay.horizon).astype(np.int64), 1, lay.horizon - 1)
    fact_step = core.randint(keys, 13, (), 0, limit)
    key = core.randint(keys, 14, (), k0, k1)
    value = core.randint(keys, 15, (), v0, v1)
    shown = ~lay.hard
    in_peek = shown & ((p <= 0) | (core.uniform(keys, 16, ()) >= p))
    _state_fact(peek, rows[in_peek], fact_step[in_peek], key[in_peek], value[in_peek])
    _state_fact(read, rows[shown], fact_step[shown], key[shown], value[shown])

    expected = np.full((n, h), core.ANY_ACTION, dtype=np.int64)
    if p < 0:  # traps: a read at such a step breaks the episode
        t = np.arange(h)[None, :]
        trap = (t > fact_step[:, None]) & (t < lay.horizon[:, None] - 1) & (core.uniform(keys, 17, (h,)) < -p)
        expected[trap] = PEEK

    last = lay.horizon - 1
    qlen = lay.lengths[rows, last]
    peek[rows, last, qlen - 2] = key
    peek[rows, last, qlen - 1] = vocab.QUERY
    read[rows, last] = peek[rows, last]  # the query is the same whatever the last action was

    return lay.instances(
        prompt=np.tile(np.asarray(prompt, dtype=np.int64), (n, 1)),
        obs=peek,
        expected=expected,
        answer=value,
        target=key,
        alt_obs=read,
        alt_action=np.full(n, READ, dtype=np.int64),
    )


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
        """Read while reading pays and the asked fact is unknown; peek otherwise."""
        return READ if self.cfg.read_payoff > 0 and target not in self.facts(ctx) else PEEK

    def summarise(self, ctx: IntArray, m: int, mode: str, target: int, rng: np.random.Generator) -> IntArray:
        """``m`` tokens: the known facts (the asked one first for ``oracle``, newest first otherwise), PAD-filled."""
        known = self.facts(ctx)
        chosen = sorted(known, key=lambda k: k != target) if mode == "oracle" else list(known)[::-1]
        out = np.full(m, vocab.PAD, dtype=np.int64)
        for i, k in enumerate(chosen[: m // 2]):
            out[2 * i : 2 * i + 2] = (k, known[k])
        return out
