"""KeyRecall, the memory task: its instance generator and its reference solver.

The env classes are the shared ones in ``simlab.tasks.envs``; this module owns only what is specific to
KeyRecall (how an episode is laid out, and how a reference agent reads and summarises one).
"""

from __future__ import annotations

import numpy as np

from simlab.tasks import core, vocab
from simlab.tasks.config import KeyRecallConfig
from simlab.tasks.core import IntArray, KeyArray


def key_tokens(cfg: KeyRecallConfig) -> tuple[int, int]:
    """[first, stop) ids of the key tokens: the lower half of the content ids, hottest first."""
    return vocab.FIRST_CONTENT, vocab.FIRST_CONTENT + cfg.num_content // 2


def value_tokens(cfg: KeyRecallConfig) -> tuple[int, int]:
    """[first, stop) ids of the value tokens: the upper half of the content ids."""
    return vocab.FIRST_CONTENT + cfg.num_content // 2, cfg.vocab_size


def prompt_tokens(cfg: KeyRecallConfig) -> list[int]:
    """The prompt every instance shares: ``TASK`` and the number of facts (as a content token; none without
    distractors); a cue in the prompt is appended per instance by :func:`generate` (:func:`prompt_len` counts it)."""
    return [vocab.TASK, vocab.FIRST_CONTENT + cfg.num_facts] if cfg.distractors else [vocab.TASK]


def prompt_len(cfg: KeyRecallConfig) -> int:
    """Tokens of the prompt: :func:`prompt_tokens` and, with a cue in the prompt, the cued key."""
    return len(prompt_tokens(cfg)) + cue_in_prompt(cfg)


def cue_in_prompt(cfg: KeyRecallConfig) -> bool:
    """Whether the prompt ends with the cued key (``cue_at = "prompt"`` and a cue)."""
    return cfg.cue_reliability is not None and cfg.cue_at == "prompt"


def cue_position(cfg: KeyRecallConfig) -> int:
    """Where the prompt's cued key stands in a working context: after ``BOS`` and :func:`prompt_tokens`."""
    return 1 + len(prompt_tokens(cfg))


def generate(keys: KeyArray, cfg: KeyRecallConfig, rollouts: KeyArray | None = None) -> core.Instances:
    """Lay out one KeyRecall episode per key (streams 10-14, and 15-17 with a cue; 0-5 are the common
    layout); nothing is drawn per rollout (``rollouts`` is unused)."""
    n, h, f = keys.size, cfg.horizon[1], cfg.num_facts
    lay = core.draw_layout(keys, cfg, prompt_len(cfg))
    rows = np.arange(n)
    k0, k1 = key_tokens(cfg)
    v0, v1 = value_tokens(cfg)

    # facts go to distinct steps early in the episode, so the asked one has left the window by the end
    limit = np.clip(np.floor(cfg.fact_frac * lay.horizon).astype(np.int64), f, lay.horizon - 1)
    order = core.uniform(keys, 10, (h,))
    order[np.arange(h)[None, :] >= limit[:, None]] = 2.0
    fact_step = np.argsort(order, axis=1, kind="stable")[:, :f]
    fact_rank = np.argsort(core.uniform(keys, 11, (k1 - k0,)), axis=1, kind="stable")[:, :f]
    fact_value = _fact_values(keys, cfg, v1 - v0)

    # the query prefers low-ranked (hot) keys: a summariser has something to learn about what to keep
    weight = (fact_rank + 1.0) ** -cfg.zipf
    cum = np.cumsum(weight, axis=1)
    u = core.uniform(keys, 13, ()) * cum[:, -1]
    q = np.minimum((cum < u[:, None]).sum(axis=1), f - 1)

    obs = lay.filler.copy() if cfg.distractors else _values_only(lay.filler, v0, v1)
    lengths = lay.lengths[rows[:, None], fact_step]
    offset = core.randint(keys, 14, (f,), 0, lengths - 2)
    shown = ~(lay.hard[:, None] & (np.arange(f)[None, :] == q[:, None]))
    ii, jj = np.nonzero(shown)
    ss, oo = fact_step[ii, jj], offset[ii, jj]
    obs[ii, ss, oo] = vocab.FACT
    obs[ii, ss, oo + 1] = k0 + fact_rank[ii, jj]
    obs[ii, ss, oo + 2] = v0 + fact_value[ii, jj]

    last = lay.horizon - 1
    qlen = lay.lengths[rows, last]
    target = k0 + fact_rank[rows, q]
    obs[rows, last, qlen - 2] = target
    obs[rows, last, qlen - 1] = vocab.QUERY

    prompts = np.tile(np.asarray(prompt_tokens(cfg), dtype=np.int64), (n, 1))
    cued = _cued(keys, cfg, q)
    if cue_in_prompt(cfg):
        prompts = np.column_stack([prompts, k0 + fact_rank[rows, cued]])
    elif cfg.cue_reliability is not None:  # the cued fact's statement carries the cue, where it is shown
        at = shown[rows, cued]
        obs[rows[at], fact_step[rows, cued][at], offset[rows, cued][at]] = vocab.CUE
    return lay.instances(
        prompt=prompts,
        obs=obs,
        expected=np.full((n, h), core.ANY_ACTION, dtype=np.int64),
        answer=v0 + fact_value[rows, q],
        target=target,
        facts=v0 + fact_value,
        cued=cued,
    )


def _values_only(filler: IntArray, first: int, stop: int) -> IntArray:
    """The filler's content tokens folded onto the value ids [first, stop) (PAD kept): no key id among them."""
    content = filler >= vocab.FIRST_CONTENT
    return np.where(content, first + (filler - vocab.FIRST_CONTENT) % (stop - first), filler)


def _fact_values(keys: KeyArray, cfg: KeyRecallConfig, values: int) -> IntArray:
    """(n, F) each fact's value offset (stream 12); with a cue distinct (stream 15), so that a summary
    holding a value holds that fact."""
    if cfg.cue_reliability is None:
        return core.randint(keys, 12, (cfg.num_facts,), 0, values)
    return np.argsort(core.uniform(keys, 15, (values,)), axis=1, kind="stable")[:, : cfg.num_facts]


def _cued(keys: KeyArray, cfg: KeyRecallConfig, asked: IntArray) -> IntArray:
    """(n,) the fact the cue names: the asked one with probability rho (stream 16), else one drawn uniformly
    (stream 17); -1 without a cue."""
    if cfg.cue_reliability is None:
        return np.full(keys.size, -1, dtype=np.int64)
    told = core.uniform(keys, 16, ()) < cfg.cue_reliability
    return np.where(told, asked, core.randint(keys, 17, (), 0, cfg.num_facts))


class FactSolver:
    """Reads ``FACT key value`` (and ``CUE key value``) facts from a working context and answers ``key QUERY``
    from them.

    Shared by the reference solvers of every task whose answer is a stated fact (KeyRecall, PeekRead).
    """

    def __init__(self, keys: tuple[int, int], values: tuple[int, int]) -> None:
        self.keys = keys
        self.values = values

    def facts(self, ctx: IntArray) -> dict[int, int]:
        """Known facts in the order they were learnt (a later statement of a key wins)."""
        known: dict[int, int] = {}
        for s in np.flatnonzero(ctx == vocab.SUMMARY):
            block = core.summary_block(ctx, int(s))
            for k, v in zip(block[0::2], block[1::2], strict=False):
                if self.keys[0] <= k < self.keys[1] and self.values[0] <= v < self.values[1]:
                    known.pop(int(k), None)
                    known[int(k)] = int(v)
        for s in np.flatnonzero((ctx[:-2] == vocab.FACT) | (ctx[:-2] == vocab.CUE)):
            k, v = int(ctx[s + 1]), int(ctx[s + 2])
            known.pop(k, None)
            known[k] = v
        return known

    def answer(self, ctx: IntArray, rng: np.random.Generator) -> int:
        """The asked key's value if a fact in the context gives it, else a guess."""
        q = np.flatnonzero(ctx == vocab.QUERY)
        known = self.facts(ctx)
        if q.size and int(ctx[q[-1] - 1]) in known:
            return known[int(ctx[q[-1] - 1])]
        return int(rng.integers(*self.values))


class KeyRecallSolver(FactSolver):
    """How a reference agent plays KeyRecall from its working context alone.

    Summaries are ``m // 2`` (key, value) pairs, PAD-filled. ``relevant`` keeps the hottest keys (the
    task's query prior), ``recency`` the most recently seen facts (the systematic flaw), ``oracle``
    keeps the fact that will be asked first, if it has been seen, ``cued`` the fact the prompt's cue
    names (the ceiling of learning relevance from the cue) and ``random`` facts in a random order (its
    floor).
    """

    MODES = KeyRecallConfig.SUMMARY_MODES

    def __init__(self, cfg: KeyRecallConfig) -> None:
        super().__init__(key_tokens(cfg), value_tokens(cfg))
        self.cfg = cfg

    def cued_key(self, ctx: IntArray) -> int | None:
        """The key the cue names, or None without a cue: the prompt's cue (the prompt opens every working
        context); a ``CUE`` statement in the context; once that is summarised away, the first key of the
        latest summary (where this solver put it)."""
        if self.cfg.cue_reliability is None:
            return None
        if cue_in_prompt(self.cfg):
            return int(ctx[cue_position(self.cfg)])
        marks = np.flatnonzero(ctx[:-1] == vocab.CUE)
        if marks.size:
            return int(ctx[marks[-1] + 1])
        blocks = np.flatnonzero(ctx == vocab.SUMMARY)
        block = core.summary_block(ctx, int(blocks[-1])) if blocks.size else ctx[:0]
        return int(block[0]) if block.size else None

    def act(self, ctx: IntArray, rng: np.random.Generator) -> int:
        """``NEXT``: actions before the query change nothing."""
        return vocab.NEXT

    def summarise(self, ctx: IntArray, m: int, mode: str, target: int, rng: np.random.Generator) -> IntArray:
        """``m`` tokens: up to ``m // 2`` (key, value) pairs chosen by ``mode``, PAD-filled."""
        known = self.facts(ctx)
        if mode == "recency":
            chosen = list(known)[::-1]
        elif mode == "random":
            chosen = [int(k) for k in rng.permutation(sorted(known))]
        else:
            chosen = sorted(known)
            first = self.cued_key(ctx) if mode == "cued" else target if mode == "oracle" else None
            if first in known:
                chosen.remove(first)
                chosen.insert(0, first)
        out = np.full(m, vocab.PAD, dtype=np.int64)
        for i, k in enumerate(chosen[: m // 2]):
            out[2 * i : 2 * i + 2] = (k, known[k])
        return out
