"""PointerChase, the state task: its instance generator and its reference solver.

The agent walks a chain: each table lists ``LINK a b`` pairs, one of which starts at its current node,
and its action is the node to move to. A wrong move is fatal (the episode runs on, unwinnable). At the
end it answers the running sum of the nodes it visited, mod ``num_nodes``, so the state a summary must
carry is a position, a step index (progress) and an accumulator.
"""

from __future__ import annotations

import numpy as np

from simlab.tasks import core, vocab
from simlab.tasks.config import PointerChaseConfig
from simlab.tasks.core import IntArray, KeyArray


def prompt_tokens_len(cfg: PointerChaseConfig) -> int:
    """The prompt's length: TASK, the start node and the first table."""
    return 2 + 3 * cfg.num_pairs  # TASK, start node, the first table


def index_token(cfg: PointerChaseConfig, t: IntArray | int) -> IntArray:
    """The token naming step ``t`` (content ids, taken mod the content count)."""
    return vocab.FIRST_CONTENT + np.asarray(t) % cfg.num_content


def generate(keys: KeyArray, cfg: PointerChaseConfig, rollouts: KeyArray | None = None) -> core.Instances:
    """Lay out one PointerChase episode per key (streams 10-15; 0-5 are the common layout); nothing is
    drawn per rollout (``rollouts`` is unused)."""
    n, h, p, nn = keys.size, cfg.horizon[1], cfg.num_pairs, cfg.num_nodes
    lay = core.draw_layout(keys, cfg, prompt_tokens_len(cfg))
    rows = np.arange(n)
    node0 = vocab.FIRST_CONTENT

    start = core.randint(keys, 10, (), 0, nn)
    hops = core.randint(keys, 11, (h,), 1, nn)  # never stay in place
    path = np.concatenate(
        [start[:, None], (start[:, None] + np.cumsum(hops, axis=1)) % nn], axis=1
    )  # (n, H+1)

    # table for move t: P pairs, distractor sources differ from the true one so exactly one matches
    src = (path[:, :h, None] + core.randint(keys, 12, (h, p), 1, nn)) % nn
    dst = core.randint(keys, 13, (h, p), 0, nn)
    slot = core.randint(keys, 14, (h,), 0, p)
    withheld = core.randint(keys, 15, (), 1, lay.horizon)  # hard: that table lacks the true pair
    keep_true = ~(lay.hard[:, None] & (np.arange(h)[None, :] == withheld[:, None]))
    ri, ti = np.nonzero(keep_true)
    src[ri, ti, slot[ri, ti]] = path[ri, ti]
    dst[ri, ti, slot[ri, ti]] = path[ri, ti + 1]
    tables = np.stack([np.full_like(src, vocab.LINK), node0 + src, node0 + dst], axis=-1).reshape(n, h, 3 * p)

    prompt = np.concatenate([np.full((n, 1), vocab.TASK), node0 + start[:, None], tables[:, 0]], axis=1)

    # observation t (after move t) opens with the index t+1 and holds the table for move t+1
    obs = lay.filler.copy()
    obs[:, :, 0] = index_token(cfg, np.arange(1, h + 1))[None, :]
    obs[:, : h - 1, 1 : 1 + 3 * p] = tables[:, 1:]
    last = lay.horizon - 1
    obs[rows, last, 1 : 1 + 3 * p] = lay.filler[rows, last, 1 : 1 + 3 * p]
    obs[rows, last, lay.lengths[rows, last] - 1] = vocab.QUERY

    visited = np.cumsum(path[:, 1:], axis=1)  # (n, H) running sum after move t
    answer = node0 + visited[rows, last] % nn
    return lay.instances(prompt=prompt, obs=obs, expected=node0 + path[:, 1:], answer=answer, target=answer)


class PointerChaseSolver:
    """How a reference agent plays PointerChase from its working context alone.

    A ``relevant`` (and ``oracle``) summary is ``[index, position, sum, next]``: the last step it
    covers, where the walk stands, the running sum and the next node if the latest table already
    gives it. ``recency`` copies the last ``m`` content tokens of the context (the latest table and
    filler), the systematic flaw: recent detail instead of the state.
    """

    def __init__(self, cfg: PointerChaseConfig) -> None:
        self.cfg = cfg
        self.nodes = (vocab.FIRST_CONTENT, vocab.FIRST_CONTENT + cfg.num_nodes)

    def _is_node(self, tok: int) -> bool:
        return self.nodes[0] <= tok < self.nodes[1]

    def state(self, ctx: IntArray) -> tuple[int, int, int, int]:
        """(last index, position, running sum, next node or -1) as far as the context tells."""
        c = self.cfg.num_content
        nn = self.cfg.num_nodes
        node0 = self.nodes[0]
        index, pos, acc, nxt = 0, int(ctx[2]) - node0 if len(ctx) > 2 else 0, 0, -1
        marks = np.flatnonzero(ctx == vocab.SUMMARY)
        if marks.size:
            block = core.summary_block(ctx, int(marks[-1]))
            if len(block) >= 3 and all(self._is_node(int(x)) for x in block[1:3]):
                index, pos, acc = int(block[0]) - node0, int(block[1]) - node0, int(block[2]) - node0
                nxt = int(block[3]) - node0 if len(block) > 3 and self._is_node(int(block[3])) else -1
        for a in np.flatnonzero(ctx[:-3] == vocab.ACT):
            move, obs_index = int(ctx[a + 1]), int(ctx[a + 3]) - node0
            if not self._is_node(move) or ctx[a + 2] != vocab.OBS:
                continue
            pos = move - node0
            ahead = (obs_index - index) % c
            if 0 < ahead < c // 2:  # a step after the one the summary covers
                acc = (acc + pos) % nn
                index = obs_index
                nxt = -1
        return index, pos, acc, nxt

    def _next(self, ctx: IntArray, pos: int, nxt: int) -> int:
        """The destination of ``pos`` in the latest table in context; ``nxt`` (from a summary) when
        no step is left in context; -1 when neither tells."""
        acts = np.flatnonzero(ctx == vocab.ACT)
        if acts.size == 0 and (ctx == vocab.SUMMARY).any():
            return nxt
        links = np.flatnonzero(ctx[:-2] == vocab.LINK)
        if acts.size:
            links = links[links > acts[-1]]  # the table in the latest observation
        for s in links:
            if int(ctx[s + 1]) - self.nodes[0] == pos:
                return int(ctx[s + 2]) - self.nodes[0]
        return -1

    def act(self, ctx: IntArray, rng: np.random.Generator) -> int:
        """The node the current one links to in the latest table in the context, else a guess."""
        _, pos, _, nxt = self.state(ctx)
        move = self._next(ctx, pos, nxt)
        if move < 0:
            move = int(rng.integers(self.cfg.num_nodes))
        return self.nodes[0] + move

    def answer(self, ctx: IntArray, rng: np.random.Generator) -> int:
        """The running sum mod the node count, as a node token."""
        return self.nodes[0] + self.state(ctx)[2]

    def summarise(self, ctx: IntArray, m: int, mode: str, target: int, rng: np.random.Generator) -> IntArray:
        """``m`` tokens: the tracked state (``relevant``, ``oracle``) or the newest content (``recency``)."""
        out = np.full(m, vocab.PAD, dtype=np.int64)
        if mode == "recency":
            content = ctx[ctx >= vocab.FIRST_CONTENT][-m:]
            out[: content.size] = content
            return out
        index, pos, acc, nxt = self.state(ctx)
        nxt = self._next(ctx, pos, nxt)
        node0 = self.nodes[0]
        state = [node0 + index % self.cfg.num_content, node0 + pos, node0 + acc]
        if nxt >= 0:
            state.append(node0 + nxt)
        out[: min(m, len(state))] = state[:m]
        return out
