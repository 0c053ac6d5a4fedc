"""The compaction harness: the batched agent loop that owns every rollout's context.

``run_rollouts`` drives N environments of one (vector) env through an ``Agent``. Per env it keeps
the working context as prompt + summary block + whole atomic steps, fires the configured trigger
after each step, runs the summary phase (``v_sum`` then ``m`` summary tokens), rebuilds the next
segment from the prompt, the summary and a verbatim tail, and never cuts inside a step. Every
segment's tokens are recorded so that a trainer can recompute log-probs over them: a segment is
exactly the context its generated tokens were conditioned on, plus those tokens.

Context layout (see docs/tasks-and-harness.md's token-protocol section):
``BOS prompt [SUMMARY s_1..s_m] (ACT a OBS o_1..o_n)* ...`` and, when the segment ends in a
compaction, ``... VSUM version s_1..s_m``. The answer turn is ``ANSWER a``.

How the loop reads: ``run_rollouts`` resets the envs (``_start``) and then plays rounds over one
explicit state object, ``LoopState`` (the settings, the agents and each env's ``RolloutState``; both in
:mod:`simlab.harness.state`). A round is three phases: every active env takes a turn (``_take_turns``:
``_act`` or ``_answer``), the envs step (``_step_env``), and the envs whose trigger fired are compacted
(``compact``, in :mod:`simlab.harness.compact`). ``_assemble`` turns the rollouts into a
``RolloutBatch`` (:mod:`simlab.harness.records`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from simlab.arrays import BoolArray, FloatArray
from simlab.harness.agents import SCRIPTED_QUALITY, LossySummariser, make_agent
from simlab.harness.compact import compact
from simlab.harness.config import HarnessConfig, check_window
from simlab.harness.phases import phase_masks
from simlab.harness.protocol import ACTION_TURN, Agent, Phase
from simlab.harness.records import RolloutBatch, RolloutRecord, SegmentTokens
from simlab.harness.state import Clock, LoopState, RolloutState, strip_pad
from simlab.harness.triggers import TRIGGERS, Trigger
from simlab.segments import SegmentBatch
from simlab.tasks import vocab
from simlab.tasks.shells import ROLLOUT_OPTION


def run_rollouts(
    env: Any,
    agent: Agent | str,
    config: HarnessConfig | None = None,
    *,
    seed: int = 0,
    group_size: int = 1,
    summariser: Agent | None = None,
    quality: float = SCRIPTED_QUALITY,
    progress: Callable[[int], None] | None = None,
    fracs: Sequence[float] | FloatArray | None = None,
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
        fracs: per env, its threshold fraction (L = floor(frac x W), :func:`~simlab.harness.config.draw_fracs`);
            default: ``config.frac`` for every env.

    Each round, every active env takes one turn (``_take_turns``: an action, or the answer once the
    env asked for it), the envs that acted step together (``_step_env``), and those whose trigger
    fired are compacted (``compact``). A COMPACT action compacts at once and asks that env again.
    """
    cfg = config if config is not None else HarnessConfig()
    trig: Trigger = TRIGGERS.get(cfg.trigger)
    n = int(env.num_envs)
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1 or n % group_size:
        raise ValueError(
            f"`group_size={group_size!r}` is invalid; choose an integer >= 1 that divides num_envs={n}"
        )
    actor = make_agent(agent, env, seed=seed, quality=quality) if isinstance(agent, str) else agent
    writer = _writer(cfg, env, actor, summariser, seed=seed, quality=quality)
    masks = phase_masks(env, cfg.trigger)  # the same table the trainer rescores tokens under
    t_start = time.perf_counter()
    loop = LoopState(
        env=env, cfg=cfg, trig=trig, actor=actor, actor_name=agent if isinstance(agent, str) else type(agent).__name__,
        writer=writer, masks=masks, progress=progress, rolls=_start(env, cfg, seed=seed, group_size=group_size),
        env_cfgs=_env_configs(env, cfg, fracs),
    )
    discard = cfg.discard and trig.length_based and trig.kind == "summary"  # SUPO's rule, for L-fired summaries
    while any(ro.active for ro in loop.rolls):
        fired = _step_env(loop, _take_turns(loop))
        if fired:
            compact(loop, fired, discard=discard)
    return _assemble(loop.rolls, cfg, group_size, loop.clock, time.perf_counter() - t_start)


def _writer(
    cfg: HarnessConfig, env: Any, actor: Agent, summariser: Agent | None, *, seed: int, quality: float
) -> Agent | None:
    """Who writes the summaries: ``summariser`` if given, else as ``cfg.summariser`` says; a separate
    summariser loses the asked fact in ``cfg.summariser_loss`` of its summaries."""
    writer = summariser if summariser is not None else _named_writer(cfg, env, actor, seed=seed, quality=quality)
    if cfg.summariser_loss and writer is not None and writer is not actor:
        return LossySummariser(writer, cfg.summariser_loss, seed=seed + 3)
    return writer


def _named_writer(cfg: HarnessConfig, env: Any, actor: Agent, *, seed: int, quality: float) -> Agent | None:
    """The summariser ``cfg.summariser`` names: the actor, nobody, or a reference agent."""
    if cfg.summariser == "self":
        return actor
    if cfg.summariser == "none":
        return None
    if cfg.summariser == "frozen":
        raise ValueError("`harness.summariser='frozen'` needs the frozen summariser agent passed as summariser=...")
    return make_agent(cfg.summariser, env, seed=seed + 1, quality=quality)


def _env_configs(
    env: Any, cfg: HarnessConfig, fracs: Sequence[float] | FloatArray | None
) -> list[HarnessConfig] | None:
    """Per env, ``cfg`` with that env's threshold fraction, each checked against the window; None without ``fracs``."""
    if fracs is None:
        return None
    values = np.asarray(fracs, dtype=np.float64).ravel()
    if values.size != int(env.num_envs):
        raise ValueError(f"fracs has {values.size} entries but the env has {int(env.num_envs)}")
    made = {f: cfg.replace(frac=f) for f in np.unique(values).tolist()}  # ConfigError outside (0, 1]
    for f in (min(made), max(made)):  # the window check is monotone in frac: its ends decide
        check_window(env, made[f])
    return [made[f] for f in values.tolist()]


def _start(env: Any, cfg: HarnessConfig, *, seed: int, group_size: int) -> list[RolloutState]:
    """Reset every env (a group shares a seed), check that the window holds one turn, open the rollouts.

    An env that takes the ``rollout`` reset option (``metadata["reset_options"]``: simlab's vector envs) is
    told each env's index in its group, ``i % G``: its rollouts share the instance and draw what may
    differ between them (PeekRead's bursts) from (instance, index).
    """
    n = int(env.num_envs)
    seeds = [seed + i // group_size for i in range(n)]
    if ROLLOUT_OPTION in (getattr(env, "metadata", None) or {}).get("reset_options", ()):
        obs, _ = env.reset(seed=seeds, options={ROLLOUT_OPTION: [i % group_size for i in range(n)]})
    else:
        obs, _ = env.reset(seed=seeds)
    check_window(env, cfg)
    return [RolloutState([vocab.BOS, *strip_pad(np.asarray(obs[i]))]) for i in range(n)]


# ---------------------------------------------------------------------------------------------- act and answer
def _take_turns(loop: LoopState) -> list[int]:
    """Every active env takes one turn: an action, or its answer once the last observation asked.

    An env that asks to compact (``ACT COMPACT`` under the ``policy`` trigger) is compacted and asked
    again, until every env has acted or answered or ended. Returns the envs that acted or answered, in
    the order they did (the order the env step processes them in).
    """
    acted: list[int] = []
    pending = [i for i, ro in enumerate(loop.rolls) if ro.active]
    while pending:
        requested = _act(loop, [i for i in pending if not loop.rolls[i].answer_due], acted)
        _answer(loop, [i for i in pending if loop.rolls[i].answer_due], acted)
        if requested:
            compact(loop, requested, discard=False, requested=True)
        pending = [i for i in requested if loop.rolls[i].active]
    return acted


def _act(loop: LoopState, ids: list[int], acted: list[int]) -> list[int]:
    """Ask the actor for one action per env in ``ids``; returns the envs that asked to compact.

    Under a trigger that lets the agent compact, COMPACT is offered once per step and only while
    compactions remain under S; those envs are asked in a second request.
    """
    fit = _fitting(loop, ids)
    if not fit:
        return []
    act = loop.masks["act"]
    if not loop.trig.agent_compacts:
        return _turn(loop, Phase.ACT, fit, act, acted)
    cap = loop.cfg.max_compactions
    may = {i for i in fit if not loop.rolls[i].blocked and loop.rolls[i].compactions < cap}
    groups = (([i for i in fit if i not in may], act), ([i for i in fit if i in may], loop.masks["act_compact"]))
    requested: list[int] = []
    for grp, allowed in groups:
        if grp:
            requested += _turn(loop, Phase.ACT, grp, allowed, acted)
    return requested


def _answer(loop: LoopState, ids: list[int], acted: list[int]) -> None:
    """Ask the actor for the answer of every env in ``ids`` (their last observation ended in QUERY)."""
    fit = _fitting(loop, ids)
    if fit:
        _turn(loop, Phase.ANSWER, fit, loop.masks["answer"], acted)


def _fitting(loop: LoopState, ids: list[int]) -> list[int]:
    """The envs in ``ids`` whose context has room for a turn; the others end as overlong ('window')."""
    fit = []
    for i in ids:
        if len(loop.rolls[i].ctx) + ACTION_TURN > loop.cfg.window:
            loop.finish(i, "window")
        else:
            fit.append(i)
    return fit


def _turn(loop: LoopState, phase: Phase, ids: list[int], allowed: BoolArray, acted: list[int]) -> list[int]:
    """One ACT or ANSWER request: append each env's marker and token; a generated action becomes the
    env's next action (appended to ``acted``). Returns the envs that generated COMPACT instead."""
    marker = vocab.ANSWER if phase == Phase.ANSWER else vocab.ACT
    rolls = loop.rolls
    toks, lp, vals = loop.ask(phase, ids, [[*rolls[i].ctx, marker] for i in ids], 1, allowed, loop.actor,
                              loop.actor_name)
    nan = [np.nan] * len(ids)
    lps = nan if lp is None else lp[:, 0].tolist()
    vs = nan if vals is None else vals[:, 0].tolist()
    requested = []
    for i, tok, lp_i, v_i in zip(ids, toks[:, 0].tolist(), lps, vs, strict=True):
        ro = rolls[i]
        start = len(ro.ctx)
        ro.append_turn(marker, tok, phase, lp_i, v_i)
        ro.ctx_lengths.append(len(ro.ctx))
        if tok == vocab.COMPACT and phase == Phase.ACT:
            requested.append(i)
        else:
            ro.step_starts.append(start)
            loop.actions[i] = tok
            acted.append(i)
    return requested


# ---------------------------------------------------------------------------------------------- env step
def _step_env(loop: LoopState, acted: list[int]) -> list[int]:
    """Step every env (finished envs too; their results are ignored) and record what the envs in
    ``acted`` observed. Ends rollouts that answered or hit a cap; returns those whose trigger fired."""
    t0 = time.perf_counter()
    obs, reward, terminated, truncated, _ = loop.env.step(loop.actions)
    loop.clock.env += time.perf_counter() - t0
    loop.actions[:] = 0
    obs = np.asarray(obs)
    cfg, trig = loop.cfg, loop.trig
    fired: list[int] = []
    for i in acted:
        ro = loop.rolls[i]
        if not ro.active:
            continue
        ro.steps += 1
        ro.seg_steps += 1
        ro.blocked = False
        if terminated[i]:
            loop.finish(i, "", float(reward[i]))
            continue
        o = strip_pad(obs[i])
        ro.append([vocab.OBS, *o])
        ro.step_context.append(len(ro.ctx))
        ro.answer_due = bool(o) and o[-1] == vocab.QUERY
        if truncated[i]:
            loop.finish(i, "truncated")
        elif ro.steps >= cfg.max_steps:
            loop.finish(i, "steps")
        # step-count triggers (chunked, every_step) wait while the answer is due: the answer turn
        # reads the query from the latest observation, as MemAgent and MEM1 do
        elif (
            trig.kind != "never"
            and (trig.length_based or not ro.answer_due)
            and trig.fires(len(ro.ctx), ro.seg_steps, loop.cfg_of(i))
        ):
            fired.append(i)
        elif len(ro.ctx) > cfg.window:
            loop.finish(i, "window")
    return fired


def _assemble(
    rolls: list[RolloutState], cfg: HarnessConfig, group_size: int, clock: Clock, total: float
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
                summary_holds={key: (counts[0], counts[1]) for key, counts in ro.summary_holds.items()},
                summaries_cut=ro.summaries_cut,
                summary_lengths=tuple(ro.summary_lengths),
                context_before=tuple(ro.context_before),
                context_after=tuple(ro.context_after),
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
