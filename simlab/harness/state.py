"""The rollout loop's state: each env's rollout while it runs (:class:`RolloutState`) and the state object
one ``run_rollouts`` call shares between its phases (:class:`LoopState`: its settings, agents, clock).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from simlab.arrays import BoolArray, FloatArray, IntArray
from simlab.harness.config import HarnessConfig
from simlab.harness.protocol import ACTION_TURN, Agent, Phase, Request, check_generation
from simlab.harness.records import SegmentTokens
from simlab.harness.triggers import Trigger
from simlab.tasks import vocab


class RolloutState:
    """Mutable per-env state of one rollout while the loop runs."""

    __slots__ = (
        "active",
        "answer_due",
        "appended",
        "blocked",
        "compactions",
        "context_after",
        "context_before",
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
        "summaries_cut",
        "summary_holds",
        "summary_lengths",
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
        self.summary_holds: dict[str, list[int]] = {}  # key -> [summaries it applied to, summaries holding it]
        self.summaries_cut = 0
        self.summary_lengths: list[int] = []
        self.context_before: list[int] = []
        self.context_after: list[int] = []
        self.start_segment(prompt)

    def start_segment(self, tokens: list[int], step_starts: list[int] | None = None) -> None:
        """Open a segment whose context starts as ``tokens`` (none of them generated here)."""
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
        """Append tokens with one phase and optimised flag, and their log-probs and values (NaN: none)."""
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
        """Drop the context from position ``n`` on."""
        for seq in (self.ctx, self.phase, self.opt, self.logp, self.values):
            del seq[n:]

    def close_segment(self) -> None:
        """Record the current segment's tokens as a :class:`SegmentTokens`."""
        self.segments.append(
            SegmentTokens(
                tokens=np.asarray(self.ctx, dtype=np.int64),
                optimised=np.asarray(self.opt, dtype=np.bool_),
                phase=np.asarray(self.phase, dtype=np.int8),
                logprobs=np.asarray(self.logp),
                values=np.asarray(self.values),
            )
        )

    def end(self, reason: str = "", reward: float = 0.0, scored: bool = False) -> None:
        """End the rollout: answered (``reason=''``, with ``reward``) or overlong for ``reason``; ``scored``:
        ended for ``reason`` but counted finished, with ``reward`` (a cut summary read as a failure)."""
        self.active = False
        self.finished = reason == "" or scored
        self.overlong = reason
        self.reward = reward if self.finished else 0.0
        self.close_segment()

    def steps_in_context(self, end: int | None = None) -> list[list[int]]:
        """The whole atomic steps in the context, up to ``end`` (default: its end)."""
        bounds = [*self.step_starts, len(self.ctx) if end is None else end]
        return [self.ctx[a:b] for a, b in itertools.pairwise(bounds)]


class SummaryProbe(Protocol):
    """What a task offers to say what a summary holds (simlab tasks' ``Instances``)."""

    def summary_holds(self, i: int, content: IntArray) -> Mapping[str, bool]:
        """By the keys of :data:`simlab.names.SUMMARY_HOLDS`, whether summary ``content`` of episode ``i``
        holds each; a key left out does not apply."""
        ...


def summary_probe(env: Any) -> SummaryProbe | None:
    """The env's summary probe: a simlab task's instances (read while a summary is written, before the
    episode resets them); None for an env without one."""
    inst = getattr(env, "instances", None)
    return inst if callable(getattr(inst, "summary_holds", None)) else None


def strip_pad(obs: IntArray) -> list[int]:
    """An observation without its PAD tokens."""
    out: list[int] = obs[obs != vocab.PAD].tolist()
    return out


@dataclass
class Clock:
    """Seconds the env and the agents took during one ``run_rollouts`` call."""

    env: float = 0.0
    agent: float = 0.0


@dataclass
class WrittenSummary:
    """A summary the writer produced for one env; log-probs and values only when the actor wrote it."""

    tokens: list[int]
    """Every token the writer generated for it (a variable-length summary's end token included)."""
    logprobs: FloatArray | None
    values: FloatArray | None
    kept: int
    """How many of ``tokens`` the next segment holds: all of a fixed-length summary, those before the
    end token of a variable-length one."""
    cut: bool = False
    """A variable-length summary that reached its budget without its end token (``harness.cut_summary``)."""


@dataclass(eq=False)
class LoopState:
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
    rolls: list[RolloutState]
    """Per env, its rollout's state."""
    clock: Clock = field(default_factory=Clock)
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

    def finish(self, i: int, reason: str, reward: float = 0.0, scored: bool = False) -> None:
        """End env ``i``'s rollout: answered (``reason=''``) or overlong for ``reason`` (``scored``: see
        :meth:`RolloutState.end`)."""
        self.rolls[i].end(reason, reward, scored)
        if self.progress is not None:
            self.progress(1)

    def ask(
        self, phase: Phase, ids: list[int], contexts: list[list[int]], num: int, allowed: BoolArray, agent: Agent,
        name: str, stop_token: int | None = None,
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
            stop_token=stop_token,
        )
        t0 = time.perf_counter()
        gen = agent.generate(req)
        self.clock.agent += time.perf_counter() - t0
        toks = check_generation(gen, req, name)
        lp = None if gen.logprobs is None else np.asarray(gen.logprobs, dtype=np.float64)
        vals = None if gen.values is None else np.asarray(gen.values, dtype=np.float64)
        return toks, lp, vals
