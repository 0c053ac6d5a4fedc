"""Compaction: closing the segments of the envs whose trigger fired (or that asked with ``ACT COMPACT``),
writing their summaries, and opening each next segment from the prompt, the summary and a verbatim tail.
"""

from __future__ import annotations

import numpy as np

from simlab.arrays import IntArray
from simlab.harness.protocol import ACTION_TURN, Phase
from simlab.harness.state import LoopState, RolloutState, SummaryProbe, WrittenSummary, summary_probe
from simlab.tasks import vocab


def compact(loop: LoopState, ids: list[int], *, discard: bool, requested: bool = False) -> None:
    """Close the segment of every env in ``ids`` and start the next one from a summary or a slide.

    ``requested``: the agent asked with ``ACT COMPACT``; those two tokens end the segment (they
    were generated in it) but are not a step, so they never reach the tail.
    """
    before = {i: len(loop.rolls[i].ctx) for i in ids}  # what the trigger read, before the discard rule cuts
    held, summarise = _before_summary(loop, ids, discard)
    summaries = _summarise(loop, summarise)
    for i in ids:
        summary = summaries.get(i)
        ro = loop.rolls[i]
        if not ro.active:
            continue
        if summary is not None and summary.cut and loop.cfg.cut_summary != "keep":
            _end_on_cut_summary(loop, i, summary)
        else:
            _next_segment(loop, i, held.get(i), summary, requested)
            ro.context_before.append(before[i])
            ro.context_after.append(len(ro.ctx))


def _end_on_cut_summary(loop: LoopState, i: int, summary: WrittenSummary) -> None:
    """A summary cut at its budget ends the rollout (``harness.cut_summary``): its tokens stay in the segment
    they were written in (trained, or masked with the rollout), and no next segment opens."""
    _append_summary(loop, loop.rolls[i], summary)
    loop.finish(i, "summary", scored=loop.cfg.cut_summary == "fail")


def _before_summary(loop: LoopState, ids: list[int], discard: bool) -> tuple[dict[int, list[int]], list[int]]:
    """End the envs out of compactions (S) and apply the discard rule; returns the held-back steps by
    env and the envs to summarise (those whose summary fits the window; the others end)."""
    cfg, rolls = loop.cfg, loop.rolls
    summary = loop.trig.kind == "summary"
    room = cfg.window - len(cfg.v_sum_tokens) - cfg.summary_room
    held: dict[int, list[int]] = {}
    summarise: list[int] = []
    for i in ids:
        ro = rolls[i]
        if summary and ro.compactions >= cfg.max_compactions:
            loop.finish(i, "compactions")  # S caps summaries; the sliding baseline has no cap
            continue
        if discard and ro.step_starts:
            # SUPO: the step that crossed the threshold is not summarised; it may survive in the tail
            held[i] = ro.ctx[ro.step_starts[-1] :]
            ro.truncate(ro.step_starts.pop())
        if summary and loop.writer is not None:
            if len(ro.ctx) > room:
                loop.finish(i, "window")  # the summary itself would not fit: SUPO's truncated summary
                continue
            summarise.append(i)
    return held, summarise


def _summarise(loop: LoopState, ids: list[int]) -> dict[int, WrittenSummary]:
    """One SUMMARY request (``v_sum`` then up to ``summary_room`` tokens) for the envs ``ids``; records what
    each summary holds. Log-probs and values are kept only when the actor wrote them."""
    if not ids or loop.writer is None:
        return {}
    cfg = loop.cfg
    stop = None if cfg.summary_budget is None else vocab.END_SUMMARY
    v_sum = list(cfg.v_sum_tokens)
    toks, lp, vals = loop.ask(Phase.SUMMARY, ids, [loop.rolls[i].ctx + v_sum for i in ids], cfg.summary_room,
                              loop.masks["summary"], loop.writer, "summariser", stop_token=stop)
    probe = summary_probe(loop.env)
    own = loop.writer_is_actor
    out: dict[int, WrittenSummary] = {}
    for r, i in enumerate(ids):
        written, kept = summary_extent(toks[r], stop)
        content, cut = toks[r, :kept], stop is not None and written == kept
        _record(loop.rolls[i], content, cut, probe, i)
        out[i] = WrittenSummary(toks[r, :written].tolist(), lp[r, :written] if (own and lp is not None) else None,
                                vals[r, :written] if (own and vals is not None) else None, kept, cut)
    return out


def summary_extent(tokens: IntArray, stop: int | None) -> tuple[int, int]:
    """(tokens written, tokens kept) of one generated summary: a fixed-length one keeps all; a variable one
    ends at its first ``stop`` token, which counts as written (the writer chose it) but is not kept."""
    if stop is None:
        return tokens.size, tokens.size
    ends = np.flatnonzero(tokens == stop)
    return (int(ends[0]) + 1, int(ends[0])) if ends.size else (tokens.size, tokens.size)


def _record(ro: RolloutState, content: IntArray, cut: bool, probe: SummaryProbe | None, i: int) -> None:
    """Count one summary of env ``i``: its length, whether it was cut at its budget, and what the task's probe
    says it holds (by the keys of :data:`simlab.names.SUMMARY_HOLDS`)."""
    ro.summaries += 1
    ro.summaries_cut += int(cut)
    ro.summary_lengths.append(int(content.size))
    for key, held in ({} if probe is None else probe.summary_holds(i, content)).items():
        counts = ro.summary_holds.setdefault(key, [0, 0])
        counts[0] += 1
        counts[1] += int(held)


def _append_summary(loop: LoopState, ro: RolloutState, summary: WrittenSummary) -> None:
    """The summarisation instruction and the written summary, at the end of the segment being closed."""
    own = loop.writer_is_actor
    ro.append(list(loop.cfg.v_sum_tokens))
    ro.append(summary.tokens, Phase.SUMMARY if own else Phase.CONTEXT, own, summary.logprobs, summary.values)
    ro.ctx_lengths.append(len(ro.ctx))


def _next_segment(
    loop: LoopState, i: int, held: list[int] | None, summary: WrittenSummary | None, requested: bool
) -> None:
    """Close env ``i``'s segment (after writing its summary, if any) and open the next one: the prompt,
    the summary block, and as many of the newest steps as the tail allows and the trigger's limit fits."""
    cfg, ro = loop.cfg, loop.rolls[i]
    steps = ro.steps_in_context(len(ro.ctx) - ACTION_TURN if requested else None)
    if held is not None:
        steps.append(held)
    head = ro.ctx[: ro.prompt_len]
    if loop.trig.kind == "slide":
        keep = steps
    else:
        if summary is not None:
            _append_summary(loop, ro, summary)
            head = [*head, vocab.SUMMARY, *summary.tokens[: summary.kept]]
        tail = len(steps) - cfg.tail_steps if cfg.tail_steps else len(steps)
        # the newest k steps, and with keep_query the one that brought the question (it stays, like a prompt)
        keep = [st for j, st in enumerate(steps) if j >= tail or (cfg.keep_query and vocab.QUERY in st)]
    ro.close_segment()
    limit = loop.trig.limit(loop.cfg_of(i))
    while keep and len(head) + sum(map(len, keep)) > limit:
        keep = keep[1:]  # CompactionRL: shrink k until the tail fits (the slide drops its oldest steps)
    starts, pos = [], len(head)
    for st in keep:
        starts.append(pos)
        pos += len(st)
    ro.start_segment(head + [t for st in keep for t in st], starts)
    ro.compactions += 1
    ro.blocked = True
    if len(ro.ctx) > cfg.window:
        loop.finish(i, "window")
