"""The compaction harness: the batched agent loop that owns every rollout's context.

``run_rollouts`` drives N environments of one (vector) env through an ``Agent``. Per env it keeps
the working context as prompt + summary block + whole atomic steps, fires the configured trigger
after each step, runs the summary phase (``v_sum`` then ``m`` summary tokens), rebuilds the next
segment from the prompt, the summary and a verbatim tail, and never cuts inside a step. Every
segment's tokens are recorded so that a trainer can recompute log-probs over them: a segment is
exactly the context its generated tokens were conditioned on, plus those tokens.

Context layout (see the README's token-protocol section):
``BOS prompt [SUMMARY s_1..s_m] (ACT a OBS o_1..o_n)* ...`` and, when the segment ends in a
compaction, ``... VSUM version s_1..s_m``. The answer turn is ``ANSWER a``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simlab.harness.agents import make_agent
from simlab.harness.config import HarnessConfig, check_window
from simlab.harness.phases import phase_masks
from simlab.harness.protocol import (
    ACTION_TURN,
    Agent,
    BoolArray,
    FloatArray,
    IntArray,
    Phase,
    Request,
    check_generation,
)
from simlab.harness.triggers import TRIGGERS, Trigger
from simlab.segments import SegmentBatch
from simlab.tasks import vocab


@dataclass(frozen=True)
class SegmentTokens:
    """One segment as a training sample: the tokens in order, and what each one is."""

    tokens: IntArray
    """(T,) every token of the segment: its starting context, then steps, then v_sum + summary."""
    optimised: BoolArray
    """(T,) True where the trained agent generated the token in this segment (the loss mask)."""
    phase: NDArray[np.int8]
    """(T,) ``Phase`` of each token (CONTEXT for everything not generated here)."""
    logprobs: FloatArray
    """(T,) the agent's log-probability of each generated token; NaN where none was given."""
    values: FloatArray
    """(T,) the agent's value at each generated token; NaN where none was given."""

    @property
    def num_optimised(self) -> int:
        return int(self.optimised.sum())


@dataclass(frozen=True)
class RolloutRecord:
    """What happened in one rollout."""

    reward: float
    finished: bool
    """Produced an answer (False: overlong)."""
    overlong: str
    """'' if finished, else why it stopped: 'steps' (H), 'compactions' (S), 'window' (no longer
    fits W) or 'truncated' (the env truncated it)."""
    steps: int
    """Env steps taken, the answer included."""
    compactions: int
    """Compactions (summaries or slides) performed."""
    tokens: int
    """Tokens written into its contexts (generated and observed), prompt and rebuilds excluded."""
    segment_rows: tuple[int, int]
    """[start, stop) rows of this rollout in ``RolloutBatch.segments`` and the SegmentBatch."""
    segment_optimised: tuple[int, ...]
    """Optimised tokens of each of its segments, in order (the SegmentBatch's counts)."""
    n_after: tuple[int, ...]
    """N_after of each of its segments: optimised tokens generated after it in this rollout."""
    context_lengths: IntArray
    """Working context (conditioning + generated tokens) at every generation, in order."""
    step_context: IntArray
    """Context length right after each env step (before any compaction)."""
    summaries: int = 0
    """Summaries written for it (by the agent or a frozen summariser)."""
    summaries_with_answer: int = 0
    """Of those, how many contain the episode's answer token: a ground-truth check of summary quality
    for tasks whose answer is a stated token (KeyRecall, PeekRead); 0 for envs without instances."""


@dataclass(frozen=True)
class RolloutBatch:
    """The harness's output: the credit layer's SegmentBatch plus the token arrays training needs."""

    batch: SegmentBatch
    segments: list[SegmentTokens]
    """Aligned with the rows of ``batch``."""
    rollouts: list[RolloutRecord]
    config: HarnessConfig
    v_sum_version: str
    env_seconds: float
    agent_seconds: float
    total_seconds: float

    @property
    def harness_seconds(self) -> float:
        return self.total_seconds - self.env_seconds - self.agent_seconds

    def padded(self) -> dict[str, NDArray[Any]]:
        """Segments as right-padded (S, T_max) arrays: tokens, attention_mask, optimised_mask, phase,
        logprobs. Batch-first; masks are 1 where the entry counts."""
        width = max(s.tokens.size for s in self.segments)
        n = len(self.segments)
        out: dict[str, NDArray[Any]] = {
            "tokens": np.full((n, width), vocab.PAD, dtype=np.int64),
            "attention_mask": np.zeros((n, width), dtype=np.bool_),
            "optimised_mask": np.zeros((n, width), dtype=np.bool_),
            "phase": np.zeros((n, width), dtype=np.int8),
            "logprobs": np.full((n, width), np.nan),
        }
        for r, s in enumerate(self.segments):
            t = s.tokens.size
            out["tokens"][r, :t] = s.tokens
            out["attention_mask"][r, :t] = True
            out["optimised_mask"][r, :t] = s.optimised
            out["phase"][r, :t] = s.phase
            out["logprobs"][r, :t] = s.logprobs
        return out


class _Rollout:
    """Mutable per-env state of one rollout while the loop runs."""

    __slots__ = (
        "active",
        "answer_due",
        "appended",
        "blocked",
        "compactions",
        "ctx",
        "ctx_lengths",
        "finished",
        "logp",
        "opt",
        "overlong",
        "phase",
        "prompt_len",
        "reward",
        "seg_steps",
        "segment_id",
        "segments",
        "step_context",
        "step_starts",
        "steps",
        "summaries",
        "summaries_with_answer",
        "values",
    )

    def __init__(self, prompt: list[int]) -> None:
        self.ctx: list[int] = []
        self.phase: list[int] = []
        self.opt: list[bool] = []
        self.logp: list[float] = []
        self.values: list[float] = []
        self.step_starts: list[int] = []
        self.segments: list[SegmentTokens] = []
        self.ctx_lengths: list[int] = []
        self.step_context: list[int] = []
        self.prompt_len = len(prompt)
        self.active = True
        self.answer_due = False
        self.blocked = False
        self.finished = False
        self.overlong = ""
        self.reward = 0.0
        self.steps = 0
        self.compactions = 0
        self.seg_steps = 0
        self.segment_id = -1
        self.appended = 0
        self.summaries = 0
        self.summaries_with_answer = 0
        self.start_segment(prompt)

    def start_segment(self, tokens: list[int], step_starts: list[int] | None = None) -> None:
        self.ctx = list(tokens)
        n = len(tokens)
        self.phase, self.opt = [0] * n, [False] * n
        self.logp, self.values = [np.nan] * n, [np.nan] * n
        self.step_starts = step_starts or []
        self.seg_steps = 0
        self.segment_id += 1

    def append(
        self,
        tokens: list[int] | tuple[int, ...],
        phase: int = 0,
        optimised: bool = False,
        logp: Any = None,
        values: Any = None,
    ) -> None:
        k = len(tokens)
        self.appended += k
        self.ctx.extend(tokens)  # callers pass Python ints (lists from .tolist(), markers)
        self.phase.extend([phase] * k)
        self.opt.extend([optimised] * k)
        self.logp.extend([np.nan] * k if logp is None else [float(x) for x in logp])
        self.values.extend([np.nan] * k if values is None else [float(x) for x in values])

    def append_turn(self, marker: int, token: int, phase: int, logp: float, value: float) -> None:
        """An action or answer turn: the harness's marker, then the agent's optimised token."""
        self.appended += ACTION_TURN
        self.ctx += (marker, token)
        self.phase += (0, phase)
        self.opt += (False, True)
        self.logp += (np.nan, logp)
        self.values += (np.nan, value)

    def truncate(self, n: int) -> None:
        for seq in (self.ctx, self.phase, self.opt, self.logp, self.values):
            del seq[n:]

    def close_segment(self) -> None:
        self.segments.append(
            SegmentTokens(
                tokens=np.asarray(self.ctx, dtype=np.int64),
                optimised=np.asarray(self.opt, dtype=np.bool_),
                phase=np.asarray(self.phase, dtype=np.int8),
                logprobs=np.asarray(self.logp),
                values=np.asarray(self.values),
            )
        )

    def end(self, reason: str = "", reward: float = 0.0) -> None:
        self.active = False
        self.finished = reason == ""
        self.overlong = reason
        self.reward = reward if self.finished else 0.0
        self.close_segment()

    def steps_in_context(self, end: int | None = None) -> list[list[int]]:
        """The whole atomic steps in the context, up to ``end`` (default: its end)."""
        bounds = [*self.step_starts, len(self.ctx) if end is None else end]
        return [self.ctx[a:b] for a, b in itertools.pairwise(bounds)]


def _answers(env: Any) -> IntArray | None:
    """Each env's current answer token, for simlab tasks (their instances are known); else None.

    Read while a summary is written: the episode is still running, so the env has not reset it yet.
    """
    inst = getattr(env, "instances", None)
    return None if inst is None else np.asarray(inst.answer)


def _strip(obs: IntArray) -> list[int]:
    out: list[int] = obs[obs != vocab.PAD].tolist()
    return out


@dataclass
class _Clock:
    env: float = 0.0
    agent: float = 0.0


def run_rollouts(
    env: Any,
    agent: Agent | str,
    config: HarnessConfig | None = None,
    *,
    seed: int = 0,
    group_size: int = 1,
    summariser: Agent | None = None,
    quality: float = 0.7,
    progress: Callable[[int], None] | None = None,
) -> RolloutBatch:
    """Run one rollout in every env of ``env`` (a Gymnasium vector env) and return the batch.

    Args:
        env: a vector env following the token protocol (``gymnasium.make_vec`` of any task).
        agent: an ``Agent`` or a registered agent name.
        config: harness settings (default ``HarnessConfig()``).
        seed: env i is reset with seed ``seed + i // group_size``, so each group of ``group_size``
            consecutive envs plays the same instance (a GRPO group).
        group_size: G, rollouts per prompt; ``num_envs`` must be a multiple of it.
        summariser: a separate frozen summariser agent; overrides ``config.summariser``.
        quality: q for reference agents built by name.
        progress: called with the number of rollouts that just ended.
    """
    cfg = config if config is not None else HarnessConfig()
    trig: Trigger = TRIGGERS.get(cfg.trigger)
    n = int(env.num_envs)
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1 or n % group_size:
        raise ValueError(
            f"`group_size={group_size!r}` is invalid; choose an integer >= 1 that divides num_envs={n}"
        )
    who = agent if isinstance(agent, str) else type(agent).__name__
    actor = make_agent(agent, env, seed=seed, quality=quality) if isinstance(agent, str) else agent
    writer: Agent | None
    if summariser is not None:
        writer = summariser
    elif cfg.summariser == "self":
        writer = actor
    elif cfg.summariser == "none":
        writer = None
    elif cfg.summariser == "frozen":
        raise ValueError("`harness.summariser='frozen'` needs the frozen summariser agent passed as summariser=...")
    else:
        writer = make_agent(cfg.summariser, env, seed=seed + 1, quality=quality)
    writer_is_actor = writer is actor

    check_window(env, cfg)  # before any env work
    masks = phase_masks(env, cfg.trigger)  # the same table the trainer rescores tokens under
    allowed_act, allowed_compact = masks["act"], masks["act_compact"]
    allowed_answer, allowed_summary = masks["answer"], masks["summary"]

    t_start = time.perf_counter()
    clock = _Clock()
    obs, _ = env.reset(seed=[seed + i // group_size for i in range(n)])
    rolls = [_Rollout([vocab.BOS, *_strip(np.asarray(obs[i]))]) for i in range(n)]
    v_sum = list(cfg.v_sum_tokens)
    m = cfg.summary_tokens

    def ask(
        phase: Phase,
        ids: list[int],
        contexts: list[list[int]],
        num: int,
        allowed: BoolArray,
        who_agent: Agent,
        name: str,
    ) -> tuple[IntArray, FloatArray | None, FloatArray | None]:
        req = Request(
            phase=phase,
            contexts=[np.asarray(c, dtype=np.int64) for c in contexts],
            num_tokens=num,
            allowed=allowed,
            env_ids=np.asarray(ids, dtype=np.int64),
            segment_ids=np.asarray([rolls[i].segment_id for i in ids], dtype=np.int64),
            window=cfg.window,
            env=env,
        )
        t0 = time.perf_counter()
        gen = who_agent.generate(req)
        clock.agent += time.perf_counter() - t0
        toks = check_generation(gen, req, name)
        lp = None if gen.logprobs is None else np.asarray(gen.logprobs, dtype=np.float64)
        vals = None if gen.values is None else np.asarray(gen.values, dtype=np.float64)
        return toks, lp, vals

    def finish(i: int, reason: str, reward: float = 0.0) -> None:
        rolls[i].end(reason, reward)
        if progress is not None:
            progress(1)

    def compact(ids: list[int], discard: bool, requested: bool = False) -> None:
        """Close the segment of every env in ``ids`` and start the next one from a summary or a slide.

        ``requested``: the agent asked with ``ACT COMPACT``; those two tokens end the segment (they
        were generated in it) but are not a step, so they never reach the tail.
        """
        held: dict[int, list[int]] = {}
        summarise: list[int] = []
        for i in ids:
            ro = rolls[i]
            if trig.kind == "summary" and ro.compactions >= cfg.max_compactions:
                finish(i, "compactions")  # S caps summaries; the sliding baseline has no cap
                continue
            if discard and ro.step_starts:
                # SUPO: the step that crossed the threshold is not summarised; it may survive in the tail
                held[i] = ro.ctx[ro.step_starts[-1] :]
                ro.truncate(ro.step_starts.pop())
            if trig.kind == "summary" and writer is not None:
                if len(ro.ctx) + len(v_sum) + m > cfg.window:
                    finish(i, "window")  # the summary itself would not fit: SUPO's truncated summary
                    continue
                summarise.append(i)
        summaries: dict[int, tuple[list[int], Any, Any]] = {}
        if summarise and writer is not None:
            toks, lp, vals = ask(
                Phase.SUMMARY,
                summarise,
                [rolls[i].ctx + v_sum for i in summarise],
                m,
                allowed_summary,
                writer,
                "summariser",
            )
            answers = _answers(env)
            for r, i in enumerate(summarise):
                rolls[i].summaries += 1
                rolls[i].summaries_with_answer += int(answers is not None and bool((toks[r] == answers[i]).any()))
                own = writer_is_actor
                summaries[i] = (
                    toks[r].tolist(),
                    lp[r] if (own and lp is not None) else None,
                    vals[r] if (own and vals is not None) else None,
                )
        for i in ids:
            ro = rolls[i]
            if not ro.active:
                continue
            steps = ro.steps_in_context(len(ro.ctx) - ACTION_TURN if requested else None)
            if i in held:
                steps.append(held[i])
            head = ro.ctx[: ro.prompt_len]
            if trig.kind == "slide":
                ro.close_segment()
                keep = steps
                while keep and ro.prompt_len + sum(map(len, keep)) > trig.limit(cfg):
                    keep = keep[1:]
            else:
                if i in summaries:
                    s, lp, vals = summaries[i]
                    ro.append(v_sum)
                    ro.append(
                        s, Phase.SUMMARY if writer_is_actor else Phase.CONTEXT, writer_is_actor, lp, vals
                    )
                    ro.ctx_lengths.append(len(ro.ctx))
                    head = [*head, vocab.SUMMARY, *s]
                ro.close_segment()
                keep = steps[len(steps) - cfg.tail_steps :] if cfg.tail_steps else []
                while keep and len(head) + sum(map(len, keep)) > trig.limit(cfg):
                    keep = keep[1:]  # CompactionRL: shrink k until the tail fits
            starts, pos = [], len(head)
            for st in keep:
                starts.append(pos)
                pos += len(st)
            ro.start_segment(head + [t for st in keep for t in st], starts)
            ro.compactions += 1
            ro.blocked = True
            if len(ro.ctx) > cfg.window:
                finish(i, "window")

    actions = np.zeros(n, dtype=np.int64)
    while any(ro.active for ro in rolls):
        # ---- act / answer phase (a COMPACT under the policy trigger compacts, then asks again)
        pending = [i for i, ro in enumerate(rolls) if ro.active]
        acted: list[int] = []
        while pending:
            to_compact: list[int] = []
            for phase in (Phase.ACT, Phase.ANSWER):
                ids = [i for i in pending if rolls[i].answer_due == (phase == Phase.ANSWER)]
                fit = []
                for i in ids:
                    if len(rolls[i].ctx) + ACTION_TURN > cfg.window:
                        finish(i, "window")
                    else:
                        fit.append(i)
                if not fit:
                    continue
                marker = vocab.ANSWER if phase == Phase.ANSWER else vocab.ACT
                if phase == Phase.ANSWER:
                    groups = [(fit, allowed_answer)]
                elif not trig.agent_compacts:
                    groups = [(fit, allowed_act)]
                else:
                    # COMPACT is offered once per step and only while compactions remain under S
                    may = {
                        i for i in fit if not rolls[i].blocked and rolls[i].compactions < cfg.max_compactions
                    }
                    groups = [
                        ([i for i in fit if i not in may], allowed_act),
                        ([i for i in fit if i in may], allowed_compact),
                    ]
                for grp, allowed in groups:
                    if not grp:
                        continue
                    toks, lp, vals = ask(
                        phase, grp, [[*rolls[i].ctx, marker] for i in grp], 1, allowed, actor, who
                    )
                    nan = [np.nan] * len(grp)
                    lps = nan if lp is None else lp[:, 0].tolist()
                    vs = nan if vals is None else vals[:, 0].tolist()
                    for i, tok, lp_i, v_i in zip(grp, toks[:, 0].tolist(), lps, vs, strict=True):
                        ro = rolls[i]
                        start = len(ro.ctx)
                        ro.append_turn(marker, tok, phase, lp_i, v_i)
                        ro.ctx_lengths.append(len(ro.ctx))
                        if tok == vocab.COMPACT and phase == Phase.ACT:
                            to_compact.append(i)
                        else:
                            ro.step_starts.append(start)
                            actions[i] = tok
                            acted.append(i)
            if to_compact:
                compact(to_compact, discard=False, requested=True)
            pending = [i for i in to_compact if rolls[i].active]

        # ---- env step (finished envs are stepped too; their results are ignored)
        t0 = time.perf_counter()
        obs, reward, terminated, truncated, _ = env.step(actions)
        clock.env += time.perf_counter() - t0
        obs = np.asarray(obs)
        fire: list[int] = []
        for i in acted:
            ro = rolls[i]
            if not ro.active:
                continue
            ro.steps += 1
            ro.seg_steps += 1
            ro.blocked = False
            if terminated[i]:
                finish(i, "", float(reward[i]))
                continue
            o = _strip(obs[i])
            ro.append([vocab.OBS, *o])
            ro.step_context.append(len(ro.ctx))
            ro.answer_due = bool(o) and o[-1] == vocab.QUERY
            if truncated[i]:
                finish(i, "truncated")
            elif ro.steps >= cfg.max_steps:
                finish(i, "steps")
            # step-count triggers (chunked, every_step) wait while the answer is due: the answer turn
            # reads the query from the latest observation, as MemAgent and MEM1 do
            elif (
                trig.kind != "never"
                and (trig.length_based or not ro.answer_due)
                and trig.fires(len(ro.ctx), ro.seg_steps, cfg)
            ):
                fire.append(i)
            elif len(ro.ctx) > cfg.window:
                finish(i, "window")
        if fire:
            compact(fire, discard=cfg.discard and trig.length_based and trig.kind == "summary")
        actions[:] = 0

    total = time.perf_counter() - t_start
    return _assemble(rolls, cfg, group_size, clock, total)


def _assemble(
    rolls: list[_Rollout], cfg: HarnessConfig, group_size: int, clock: _Clock, total: float
) -> RolloutBatch:
    segments: list[SegmentTokens] = []
    records: list[RolloutRecord] = []
    counts: list[list[int]] = []
    values: list[list[FloatArray]] = []
    has_values = all(np.isfinite(s.values[s.optimised]).all() for ro in rolls for s in ro.segments) and any(
        s.num_optimised for ro in rolls for s in ro.segments
    )
    for ro in rolls:
        kept = [s for s in ro.segments if s.num_optimised > 0]  # e.g. a segment cut short by the window
        if not kept:
            raise RuntimeError("a rollout produced no agent tokens; the window check should have caught it")
        start = len(segments)
        segments.extend(kept)
        counts.append([s.num_optimised for s in kept])
        values.append([s.values[s.optimised] for s in kept])
        records.append(
            RolloutRecord(
                reward=ro.reward,
                finished=ro.finished,
                overlong=ro.overlong,
                steps=ro.steps,
                compactions=ro.compactions,
                summaries=ro.summaries,
                summaries_with_answer=ro.summaries_with_answer,
                tokens=ro.appended,
                segment_rows=(start, len(segments)),
                segment_optimised=tuple(counts[-1]),
                n_after=(*(int(x) for x in np.cumsum(counts[-1][::-1])[::-1][1:]), 0),
                context_lengths=np.asarray(ro.ctx_lengths, dtype=np.int64),
                step_context=np.asarray(ro.step_context, dtype=np.int64),
            )
        )
    batch = SegmentBatch.from_rollouts(
        counts,
        [r.reward for r in records],
        groups=[i // group_size for i in range(len(rolls))],
        values=values if has_values else None,
        finished=[r.finished for r in records],
    )
    return RolloutBatch(
        batch=batch,
        segments=segments,
        rollouts=records,
        config=cfg,
        v_sum_version=cfg.v_sum,
        env_seconds=clock.env,
        agent_seconds=clock.agent,
        total_seconds=total,
    )
