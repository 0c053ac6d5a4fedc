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

How the loop reads: ``run_rollouts`` resets the envs (``_start``) and then plays rounds over one
explicit state object, ``_Loop`` (the settings, the agents and each env's ``_Rollout``). A round is
three phases: every active env takes a turn (``_take_turns``: ``_act`` or ``_answer``), the envs
step (``_step_env``), and the envs whose trigger fired are compacted (``_compact``:
``_before_summary``, ``_summarise``, ``_next_segment``). ``_assemble`` turns the rollouts into a
``RolloutBatch``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simlab.harness.agents import SCRIPTED_QUALITY, make_agent
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
from simlab.tasks.envs import ROLLOUT_OPTION


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
        """Tokens of the segment the policy generated (the ones the update optimises)."""
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
        """Seconds spent in the harness itself: the total less the env's and the agents' time."""
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


@dataclass
class _Summary:
    """A summary the writer produced for one env; log-probs and values only when the actor wrote it."""

    tokens: list[int]
    logprobs: FloatArray | None
    values: FloatArray | None


@dataclass(eq=False)
class _Loop:
    """Everything one ``run_rollouts`` call shares between its phases: what it was given, and its state.

    The phase functions below take it explicitly; the mutable parts are ``rolls``, ``clock`` and
    ``actions``.
    """

    env: Any
    cfg: HarnessConfig
    trig: Trigger
    actor: Agent
    actor_name: str
    """Names the actor in errors about what it generated."""
    writer: Agent | None
    """Who writes summaries: the actor, a separate frozen summariser, or nobody."""
    masks: dict[str, BoolArray]
    """``phase_masks`` of the env: the tokens allowed in each phase."""
    progress: Callable[[int], None] | None
    rolls: list[_Rollout]
    """Per env, its rollout's state."""
    clock: _Clock = field(default_factory=_Clock)
    env_cfgs: list[HarnessConfig] | None = None
    """Per env, its settings when thresholds are drawn (``fracs``); None: every env uses ``cfg``."""
    actions: IntArray = field(init=False)
    """(n,) the action each env takes at the next env step (0 for envs that do not act)."""

    def __post_init__(self) -> None:
        self.actions = np.zeros(len(self.rolls), dtype=np.int64)

    def cfg_of(self, i: int) -> HarnessConfig:
        """Env ``i``'s settings: the run's, with the env's own threshold fraction when thresholds are drawn."""
        return self.cfg if self.env_cfgs is None else self.env_cfgs[i]

    @property
    def writer_is_actor(self) -> bool:
        """The actor writes its own summaries: they are optimised, with its log-probs and values."""
        return self.writer is self.actor

    def finish(self, i: int, reason: str, reward: float = 0.0) -> None:
        """End env ``i``'s rollout: answered (``reason=''``) or overlong for ``reason``."""
        self.rolls[i].end(reason, reward)
        if self.progress is not None:
            self.progress(1)

    def ask(
        self, phase: Phase, ids: list[int], contexts: list[list[int]], num: int, allowed: BoolArray, agent: Agent,
        name: str,
    ) -> tuple[IntArray, FloatArray | None, FloatArray | None]:
        """One batched request to ``agent`` for the envs ``ids``: (n, num) tokens, log-probs, values."""
        req = Request(
            phase=phase,
            contexts=[np.asarray(c, dtype=np.int64) for c in contexts],
            num_tokens=num,
            allowed=allowed,
            env_ids=np.asarray(ids, dtype=np.int64),
            segment_ids=np.asarray([self.rolls[i].segment_id for i in ids], dtype=np.int64),
            window=self.cfg.window,
            env=self.env,
        )
        t0 = time.perf_counter()
        gen = agent.generate(req)
        self.clock.agent += time.perf_counter() - t0
        toks = check_generation(gen, req, name)
        lp = None if gen.logprobs is None else np.asarray(gen.logprobs, dtype=np.float64)
        vals = None if gen.values is None else np.asarray(gen.values, dtype=np.float64)
        return toks, lp, vals


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
    fired are compacted (``_compact``). A COMPACT action compacts at once and asks that env again.
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
    loop = _Loop(
        env=env, cfg=cfg, trig=trig, actor=actor, actor_name=agent if isinstance(agent, str) else type(agent).__name__,
        writer=writer, masks=masks, progress=progress, rolls=_start(env, cfg, seed=seed, group_size=group_size),
        env_cfgs=_env_configs(env, cfg, fracs),
    )
    discard = cfg.discard and trig.length_based and trig.kind == "summary"  # SUPO's rule, for L-fired summaries
    while any(ro.active for ro in loop.rolls):
        fired = _step_env(loop, _take_turns(loop))
        if fired:
            _compact(loop, fired, discard=discard)
    return _assemble(loop.rolls, cfg, group_size, loop.clock, time.perf_counter() - t_start)


def _writer(
    cfg: HarnessConfig, env: Any, actor: Agent, summariser: Agent | None, *, seed: int, quality: float
) -> Agent | None:
    """Who writes the summaries: ``summariser`` if given, else as ``cfg.summariser`` says."""
    if summariser is not None:
        return summariser
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


def _start(env: Any, cfg: HarnessConfig, *, seed: int, group_size: int) -> list[_Rollout]:
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
    return [_Rollout([vocab.BOS, *_strip(np.asarray(obs[i]))]) for i in range(n)]


# ---------------------------------------------------------------------------------------------- act and answer
def _take_turns(loop: _Loop) -> list[int]:
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
            _compact(loop, requested, discard=False, requested=True)
        pending = [i for i in requested if loop.rolls[i].active]
    return acted


def _act(loop: _Loop, ids: list[int], acted: list[int]) -> list[int]:
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


def _answer(loop: _Loop, ids: list[int], acted: list[int]) -> None:
    """Ask the actor for the answer of every env in ``ids`` (their last observation ended in QUERY)."""
    fit = _fitting(loop, ids)
    if fit:
        _turn(loop, Phase.ANSWER, fit, loop.masks["answer"], acted)


def _fitting(loop: _Loop, ids: list[int]) -> list[int]:
    """The envs in ``ids`` whose context has room for a turn; the others end as overlong ('window')."""
    fit = []
    for i in ids:
        if len(loop.rolls[i].ctx) + ACTION_TURN > loop.cfg.window:
            loop.finish(i, "window")
        else:
            fit.append(i)
    return fit


def _turn(loop: _Loop, phase: Phase, ids: list[int], allowed: BoolArray, acted: list[int]) -> list[int]:
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
def _step_env(loop: _Loop, acted: list[int]) -> list[int]:
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
        o = _strip(obs[i])
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


# ---------------------------------------------------------------------------------------------- compact
def _compact(loop: _Loop, ids: list[int], *, discard: bool, requested: bool = False) -> None:
    """Close the segment of every env in ``ids`` and start the next one from a summary or a slide.

    ``requested``: the agent asked with ``ACT COMPACT``; those two tokens end the segment (they
    were generated in it) but are not a step, so they never reach the tail.
    """
    held, summarise = _before_summary(loop, ids, discard)
    summaries = _summarise(loop, summarise)
    for i in ids:
        if loop.rolls[i].active:
            _next_segment(loop, i, held.get(i), summaries.get(i), requested)


def _before_summary(loop: _Loop, ids: list[int], discard: bool) -> tuple[dict[int, list[int]], list[int]]:
    """End the envs out of compactions (S) and apply the discard rule; returns the held-back steps by
    env and the envs to summarise (those whose summary fits the window; the others end)."""
    cfg, rolls = loop.cfg, loop.rolls
    summary = loop.trig.kind == "summary"
    room = cfg.window - len(cfg.v_sum_tokens) - cfg.summary_tokens
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


def _summarise(loop: _Loop, ids: list[int]) -> dict[int, _Summary]:
    """One SUMMARY request (``v_sum`` then m tokens) for the envs ``ids``; counts each summary that
    holds the episode's answer. Log-probs and values are kept only when the actor wrote them."""
    if not ids or loop.writer is None:
        return {}
    v_sum = list(loop.cfg.v_sum_tokens)
    toks, lp, vals = loop.ask(Phase.SUMMARY, ids, [loop.rolls[i].ctx + v_sum for i in ids],
                              loop.cfg.summary_tokens, loop.masks["summary"], loop.writer, "summariser")
    answers = _answers(loop.env)
    own = loop.writer_is_actor
    out: dict[int, _Summary] = {}
    for r, i in enumerate(ids):
        ro = loop.rolls[i]
        ro.summaries += 1
        ro.summaries_with_answer += int(answers is not None and bool((toks[r] == answers[i]).any()))
        out[i] = _Summary(toks[r].tolist(), lp[r] if (own and lp is not None) else None,
                          vals[r] if (own and vals is not None) else None)
    return out


def _next_segment(loop: _Loop, i: int, held: list[int] | None, summary: _Summary | None, requested: bool) -> None:
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
            own = loop.writer_is_actor
            ro.append(list(cfg.v_sum_tokens))
            ro.append(summary.tokens, Phase.SUMMARY if own else Phase.CONTEXT, own, summary.logprobs, summary.values)
            ro.ctx_lengths.append(len(ro.ctx))
            head = [*head, vocab.SUMMARY, *summary.tokens]
        keep = steps[len(steps) - cfg.tail_steps :] if cfg.tail_steps else []
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
