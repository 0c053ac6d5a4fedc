"""Reference agents, registered by name: ``oracle`` (the ceiling), ``scripted`` (quality q), ``random``,
and on a task with a cue ``cued`` (keeps the fact the cue names with probability q, facts in a random order
otherwise) and ``any_fact`` (always a random order): at q = 1 and 0, the ceiling and the floor of
learning relevance from the cue.

Each is built by a factory ``(env, *, seed, quality) -> Agent``. ``oracle`` and ``scripted`` play
through the task's solver (``env.solver``, which every simlab task has), so they act and answer from
their working context alone, the way a policy must. They differ only in summaries: the oracle keeps
what the hidden instance says will matter; the scripted agent keeps what matters with probability
``q`` and otherwise follows a systematic wrong priority (recency instead of relevance), a flaw that a
behaviour-cloned student inherits instead of averaging away.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from simlab.arrays import IntArray
from simlab.errors import ConfigError
from simlab.harness.protocol import Agent, Generation, Phase, Request
from simlab.registry import Registry
from simlab.tasks import vocab
from simlab.tasks.config import TaskConfig

AgentFactory = Callable[..., Agent]
AGENTS: Registry[AgentFactory] = Registry("agent")


def find_solver(env: Any, who: str) -> Any:
    """The task solver a reference agent plays through; a clear error for tasks that have none."""
    for candidate in (env, getattr(env, "unwrapped", None)):
        solver = getattr(candidate, "solver", None)
        if solver is not None:
            return solver
    raise ConfigError(
        f"agent {who!r} needs a simlab task (one with a `solver`); this env has none. "
        "Use 'random' or pass your own Agent"
    )


SUMMARY_MODES: dict[str, tuple[str, str]] = {
    "scripted": ("relevant", "recency"),
    "oracle": ("oracle", "oracle"),
    "cued": ("cued", "random"),
    "any_fact": ("random", "random"),
}
"""How each solver agent summarises: (the solver's mode with probability q, its mode otherwise). An agent
whose two modes are one draws nothing."""
EVERY_SOLVER = TaskConfig.SUMMARY_MODES
"""Summary modes every task's solver has; the others are listed in a solver's ``MODES`` (KeyRecall)."""


class SolverAgent:
    """Acts and answers with the task solver; summarises in a mode chosen per summary (:data:`SUMMARY_MODES`)."""

    def __init__(
        self,
        env: Any,
        *,
        name: str = "scripted",
        seed: int = 0,
        quality: float = 1.0,
        compact_frac: float = 0.8,
        compact_hazard: float = 0.0,
    ) -> None:
        self.name = name
        self.solver = find_solver(env, name)
        needs = sorted(set(SUMMARY_MODES[name]) - set(EVERY_SOLVER) - set(getattr(self.solver, "MODES", ())))
        if needs:
            raise ConfigError(f"agent {name!r} needs a task whose solver summarises by {needs} (KeyRecall); this "
                              f"task's solver has modes {getattr(self.solver, 'MODES', EVERY_SOLVER)}")
        self.rng = np.random.default_rng(seed)
        self.quality = float(quality)
        self.compact_frac = compact_frac
        """Under the ``policy`` trigger, emit COMPACT once the context reaches this share of W."""
        self.compact_hazard = compact_hazard
        """Under the ``policy`` trigger, also emit COMPACT earlier, with this probability at each action step
        (0: never; the random draw is skipped, so the agent's stream is as without it)."""

    def _mode(self) -> str:
        first, other = SUMMARY_MODES[self.name]
        if first == other:
            return first
        return first if self.rng.random() < self.quality else other

    def _compacts_early(self) -> bool:
        return self.compact_hazard > 0 and bool(self.rng.random() < self.compact_hazard)

    def generate(self, request: Request) -> Generation:
        """Tokens for every context in ``request``: actions and answers by the solver, summaries by mode."""
        out = np.empty((len(request.contexts), request.num_tokens), dtype=np.int64)
        targets = _targets(request)
        cue = len(vocab.v_sum()) if request.phase == Phase.SUMMARY else 1
        for r, full in enumerate(request.contexts):
            ctx = full[:-cue]  # the solver reads history, not the harness's cue for this phase
            if request.phase == Phase.SUMMARY:
                out[r] = self.solver.summarise(
                    ctx, request.num_tokens, self._mode(), int(targets[r]), self.rng
                )
            elif request.phase == Phase.ANSWER:
                out[r, 0] = self.solver.answer(ctx, self.rng)
            elif request.allowed[vocab.COMPACT] and (full.size >= self.compact_frac * request.window
                                                     or self._compacts_early()):
                out[r, 0] = vocab.COMPACT
            elif self.name == "oracle" and hasattr(self.solver, "oracle_act"):  # acting well needs the target
                out[r, 0] = self.solver.oracle_act(ctx, int(targets[r]), self.rng)
            else:
                out[r, 0] = self.solver.act(ctx, self.rng)
        return Generation(tokens=out)


class LossySummariser:
    """A separate frozen summariser whose summaries lose the asked fact with probability ``loss``.

    It wraps the agent that writes the summaries (a reference agent or a frozen policy) and passes every
    other phase through. A lossy summary has every ``(key, value)`` pair whose key is the instance's
    target removed, the pairs after it moved up and PAD at the end: ReSum's ReSumTool when it misses
    what the answer needs (``harness.summariser_loss``). The draw is one uniform per summary from its own
    generator, so the wrapped agent's stream is the one it has without the wrapper.
    """

    def __init__(self, agent: Agent, loss: float, *, seed: int) -> None:
        self.agent = agent
        self.loss = float(loss)
        self.rng = np.random.default_rng(seed)

    def generate(self, request: Request) -> Generation:
        """The wrapped agent's tokens; in the summary phase, the lost rows without their target's pairs."""
        gen = self.agent.generate(request)
        if request.phase != Phase.SUMMARY:
            return gen
        lost = self.rng.random(len(request.contexts)) < self.loss
        targets = _targets(request)
        tokens = gen.tokens.copy()
        for r in np.flatnonzero(lost):
            tokens[r] = drop_pairs(tokens[r], int(targets[r]))
        return replace(gen, tokens=tokens)


def drop_pairs(summary: IntArray, key: int) -> IntArray:
    """``summary`` without the ``(key, value)`` pairs (at even offsets) whose key is ``key``, PAD-filled."""
    pairs = summary[: summary.size // 2 * 2].reshape(-1, 2)
    kept = pairs[pairs[:, 0] != key].ravel()
    out = np.full(summary.size, vocab.PAD, dtype=summary.dtype)
    out[: kept.size] = kept
    return out


def _targets(request: Request) -> IntArray:
    inst = getattr(request.env, "instances", None)
    if inst is None:
        return np.full(len(request.contexts), -1, dtype=np.int64)
    return np.asarray(inst.target)[request.env_ids]


class RandomAgent:
    """Chance level: uniform over the allowed tokens; COMPACT (when allowed) with ``compact_prob``."""

    def __init__(self, env: Any = None, *, seed: int = 0, quality: float = 1.0, compact_prob: float = 0.05):
        self.rng = np.random.default_rng(seed)
        self.compact_prob = compact_prob

    def generate(self, request: Request) -> Generation:
        """Uniformly random allowed tokens (COMPACT with probability ``compact_prob`` where it is allowed)."""
        choices = np.flatnonzero(request.allowed)
        compact = request.allowed[vocab.COMPACT]
        if compact:
            choices = choices[choices != vocab.COMPACT]
        n = len(request.contexts)
        out = choices[self.rng.integers(choices.size, size=(n, request.num_tokens))]
        if compact:
            out[self.rng.random(n) < self.compact_prob, 0] = vocab.COMPACT
        return Generation(tokens=out.astype(np.int64))


SCRIPTED_QUALITY = 0.7
"""The scripted agent's default summary quality q: the share of summaries that keep what matters (an
imperfect teacher and summariser; the oracle's is 1)."""


def _oracle(env: Any, *, seed: int = 0, quality: float = 1.0) -> Agent:
    return SolverAgent(env, name="oracle", seed=seed)


def _scripted(env: Any, *, seed: int = 0, quality: float = SCRIPTED_QUALITY) -> Agent:
    return SolverAgent(env, seed=seed, quality=quality)


def _random(env: Any, *, seed: int = 0, quality: float = 1.0) -> Agent:
    return RandomAgent(env, seed=seed)


def _cued(env: Any, *, seed: int = 0, quality: float = 1.0) -> Agent:
    return SolverAgent(env, name="cued", seed=seed, quality=quality)


def _any_fact(env: Any, *, seed: int = 0, quality: float = 1.0) -> Agent:
    return SolverAgent(env, name="any_fact", seed=seed)


AGENTS.add("oracle", _oracle)
AGENTS.add("scripted", _scripted)
AGENTS.add("random", _random)
AGENTS.add("cued", _cued)
AGENTS.add("any_fact", _any_fact)


def agent_fits(name: str, task: TaskConfig) -> str | None:
    """Why the reference agent ``name`` cannot play ``task``, or None when it can: the task says which of the
    agent's summary modes (:data:`SUMMARY_MODES`) its solver lacks under its settings."""
    for mode in SUMMARY_MODES.get(name, ()):
        if (why := task.summary_mode_refusal(mode)) is not None:
            return f"agent {name!r} summarises by {mode!r}: {why}; choose another agent or task"
    return None


def make_agent(name: str, env: Any, *, seed: int = 0, quality: float = SCRIPTED_QUALITY,
               compact_hazard: float = 0.0) -> Agent:
    """Build the registered agent ``name``; unknown names list the valid ones. ``compact_hazard`` (a solver
    agent's, :attr:`SolverAgent.compact_hazard`): its chance per action step of an early COMPACT."""
    if not (isinstance(quality, (int, float)) and not isinstance(quality, bool) and 0.0 <= quality <= 1.0):
        raise ConfigError.invalid("agent.quality", quality, "choose a value in [0, 1]")
    agent = AGENTS.get(name)(env, seed=seed, quality=quality)
    if compact_hazard:
        if not isinstance(agent, SolverAgent):
            raise ConfigError.invalid("base.compact_hazard", compact_hazard,
                                      f"agent {name!r} does not compact by a rule; choose a solver agent or 0")
        agent.compact_hazard = float(compact_hazard)
    return agent
