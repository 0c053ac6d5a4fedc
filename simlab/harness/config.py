"""The harness configuration (one section, checked when built), and the two rules on its geometry.

- The **effective horizon** H: the most context a rollout can consume across its segments. It is
  defined here once (:func:`effective_horizon`); the run config, the recipes, ``simlab inspect`` and
  the report all call it.
- The **window check**: the window (and L, for length triggers) must hold the task's prompt, a summary
  and one step. :func:`check_window` is the one entry point; the config layer calls it before any run
  starts and the rollout loop calls it on the env it is given.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from simlab.errors import ConfigError
from simlab.harness.protocol import ACTION_TURN
from simlab.refusals import int_text
from simlab.rules import STEPS_MAX, TOKENS_MAX, Names, Real, Unit
from simlab.schema import Section
from simlab.tasks import vocab


def _triggers() -> Any:
    from simlab.harness.triggers import TRIGGERS

    return TRIGGERS


def _agents() -> Any:
    from simlab.harness.agents import AGENTS

    return AGENTS


THRESHOLD_DRAWS = ("fixed", "group", "rollout")
"""How the rollouts of a training step get their threshold fraction (:func:`draw_fracs`)."""
_DRAW_STREAM = 0x7E5D
"""Mixed into the seed of the threshold draws, so they share no stream with the env or the sampler."""

WINDOW_ONLY = ("never", "slide")
"""Trigger kinds that never summarise: a rollout never holds more than one window W of history."""


def summary_room(summary_tokens: int, summary_budget: int | None) -> int:
    """The most tokens one summary request generates: the budget of a variable-length summary, else the
    fixed m."""
    return summary_tokens if summary_budget is None else summary_budget


def threshold(window: int, frac: float) -> int:
    """L = floor(frac x W), in tokens."""
    return math.floor(frac * window)


def horizon(limit: float, max_compactions: int) -> float:
    """H = L x (S + 1): the most context a rollout can use with S compactions of an L-token context."""
    return limit * (max_compactions + 1)


def effective_horizon(
    *, window: int, frac: float, max_compactions: int, trigger: str = "threshold", t_comp: int | None = None
) -> int:
    """The effective horizon of a harness setting, in tokens.

    L x (S + 1) with L = floor(frac x W); the ``budget`` trigger fires at W - T_comp, so that is its L;
    a trigger that never summarises (``none``, ``sliding``) gives W. Raises ``UnknownNameError`` for an
    unknown trigger.
    """
    trig = _triggers().get(trigger)
    if trig.kind in WINDOW_ONLY:
        return int(window)
    limit = window - t_comp if trig.name == "budget" and t_comp is not None else threshold(window, frac)
    return int(horizon(limit, max_compactions))


class HarnessConfig(Section):
    """How the harness builds contexts and compacts them (the published loops as settings)."""

    SECTION = "harness"

    window: Annotated[int, Field(ge=8, le=TOKENS_MAX)] = 128
    """W: the working window, in tokens, that the agent sees."""
    trigger: Annotated[str, Names(_triggers)] = "threshold"
    """When to compact: a name in ``simlab.harness.TRIGGERS``."""
    frac: Annotated[Real, Field(gt=0, le=1)] = 0.8
    """L = floor(frac * W): the length threshold of ``threshold``, ``policy`` and ``sliding`` (SUPO)."""
    t_comp: Annotated[int, Field(ge=1, le=TOKENS_MAX)] = 24
    """``budget`` compacts when W - context < t_comp (CompactionRL's T_comp)."""
    chunk_steps: Annotated[int, Field(ge=1, le=STEPS_MAX)] = 4
    """``chunked`` compacts every this many steps (MemAgent)."""
    discard: bool = True
    """SUPO's discard rule: the step that pushed the context over the threshold is not summarised.
    Its action is never optimised (its context is gone); it is replayed verbatim as the newest tail
    step when ``tail_steps >= 1`` and fits, and lost otherwise (as in SUPO)."""
    tail_steps: Annotated[int, Field(ge=0, le=STEPS_MAX)] = 1
    """k: steps kept verbatim after a compaction (shrunk to fit)."""
    keep_query: bool = False
    """The step whose observation carries ``QUERY`` survives a compaction (it joins the verbatim tail even
    beyond k), as a paper's harness keeps the user's question in the prompt. ``False``: the step is lost
    when the discard rule cuts it (or it is summarised) and k = 0, and the answer turn sees no question
    (docs/tasks-and-harness.md, "When the discard rule takes the question away")."""
    summary_tokens: Annotated[int, Field(ge=0, le=TOKENS_MAX)] = 8
    """m: tokens the summariser writes, every time (ignored when ``summary_budget`` is set)."""
    summary_budget: Annotated[int, Field(ge=1, le=TOKENS_MAX)] | None = None
    """Variable-length summaries: the summariser writes until it emits the end-of-summary token
    (``vocab.END_SUMMARY``) or has written this many tokens, the end token included, whichever comes
    first; the next segment holds what came before the end token. ``None``: fixed length ``summary_tokens``."""
    cut_summary: Literal["keep", "truncate", "fail"] = "keep"
    """A variable-length summary that reaches ``summary_budget`` without its end token was cut at the cap: a
    failed compaction (pi #7048, nano-rlm #178). ``keep`` it as written (the next segment holds it);
    ``truncate``: end the rollout unfinished (overlong reason 'summary': out of the loss under the overlong
    mask, as verifiers counts it); ``fail``: end it finished with reward 0 (scored and trained). Needs
    ``summary_budget`` unless ``keep``."""
    max_compactions: Annotated[int, Field(ge=0, le=STEPS_MAX)] = 4
    """S: compactions allowed per rollout; needing one more ends the rollout as overlong."""
    max_steps: Annotated[int, Field(ge=1, le=STEPS_MAX)] = 64
    """H: env steps allowed per rollout (the answer included); reaching it unanswered is overlong."""
    summariser: Annotated[
        str, Names(_agents, ("self", "none", "frozen"), "'frozen': a frozen policy checkpoint")
    ] = "self"
    """Who writes summaries: ``self`` (the agent), ``none`` (compaction drops history without a
    summary) or a reference agent's name (a separate frozen summariser, e.g. ``oracle``)."""
    v_sum: Annotated[str, Names(lambda: vocab.V_SUM_VERSIONS)] = "v1"
    """Version of the summarisation instruction; stored with every rollout batch."""
    summariser_quality: Annotated[Real, Field(ge=0, le=1)] | None = None
    """Quality q of a ``scripted`` frozen summariser (the summariser-swap experiment); ``None``: the base
    model's teacher quality ``base.quality``, so swapping the summariser does not change the base model."""
    summariser_loss: Unit = 0.0
    """The share of a separate summariser's summaries (a reference agent or ``frozen``) that lose the asked
    fact: ReSum's frozen ReSumTool missing what the answer needs (``simlab.harness.agents.LossySummariser``).
    0: every summary is the summariser's own. Needs a summariser other than ``self`` and ``none``."""

    def check(self) -> None:
        """A summary's budget has to fit the window (the threshold's room for it, and ``t_comp``'s bounds, are
        :meth:`check_fits`'s: they need the task's sizes), and a lossy summariser must be a separate one."""
        if self.summary_budget is not None and self.summary_budget > self.window - 1:
            raise self.invalid("summary_budget", int_text(1, self.window - 1), involves=("harness.window",))
        if self.cut_summary != "keep" and self.summary_budget is None:
            raise self.invalid("cut_summary", "choose 'keep' unless summaries have a variable length (set "
                               "harness.summary_budget): a fixed-length summary is never cut",
                               involves=("harness.summary_budget",))
        if self.summariser_loss and self.summariser in ("self", "none"):
            raise self.invalid("summariser_loss", "choose 0 unless harness.summariser is a separate summariser "
                               f"(a reference agent or 'frozen'; it is {self.summariser!r})",
                               involves=("harness.summariser",))

    @property
    def threshold(self) -> int:
        """L in tokens."""
        return threshold(self.window, self.frac)

    @property
    def summary_room(self) -> int:
        """The most tokens one summary request generates (:func:`summary_room`)."""
        return summary_room(self.summary_tokens, self.summary_budget)

    @property
    def v_sum_tokens(self) -> tuple[int, ...]:
        """The summarisation instruction's tokens."""
        return vocab.v_sum(self.v_sum)

    @property
    def effective_horizon(self) -> int:
        """H: the most context a rollout can consume across its segments (:func:`effective_horizon`)."""
        return effective_horizon(window=self.window, frac=self.frac, max_compactions=self.max_compactions,
                                 trigger=self.trigger, t_comp=self.t_comp)

    def check_fits(self, prompt_tokens: int, step_tokens: int) -> None:
        """The window (and L, for length triggers) must hold the prompt, a summary and one step."""
        need = 1 + prompt_tokens + 1 + self.summary_room + step_tokens
        sizes = ("harness.summary_tokens", "harness.summary_budget", "task")  # what `need` is made of
        if self.window < need:
            raise self.invalid(
                "window", f"it cannot hold the prompt ({1 + prompt_tokens}), a summary ({1 + self.summary_room}) "
                f"and one step ({step_tokens}); choose an integer >= {need}", involves=sizes,
            )
        trig = _triggers().get(self.trigger)
        limit = trig.limit(self)
        key = "t_comp" if trig.name == "budget" else "frac"  # the budget trigger's limit is W - t_comp
        if trig.kind != "never" and trig.length_based and limit < need:
            fix = f"raise it so the limit is >= {need}"
            if key == "t_comp":
                fix = f"choose an integer <= {self.window - need}"
            raise self.invalid(
                key, f"the trigger limit {limit} tokens cannot hold the prompt, a summary and one step "
                f"({need} tokens); {fix}", involves=("harness.window", *sizes),
            )
        most = self.window - len(self.v_sum_tokens) - self.summary_room
        if trig.kind == "summary" and trig.length_based and limit > most:
            fix = f"lower it so the limit is <= {most}"
            if key == "t_comp":
                fix = f"choose an integer >= {self.window - most}"
            raise self.invalid(
                key, f"the trigger limit {limit} + v_sum ({len(self.v_sum_tokens)}) + summary "
                f"({self.summary_room}) exceeds the window {self.window}, so no summary could be written; {fix}",
                involves=("harness.window", "harness.v_sum", *sizes),
            )


def draw_fracs(
    frac: float, *, draw: str, spread: float, seed: int, num_envs: int, group_size: int
) -> NDArray[np.float64]:
    """(num_envs,) each rollout's threshold fraction, L_i = floor(frac_i x W) (verifiers PR #1983's question).

    frac_i = frac                                  draw = 'fixed'
    frac_i = frac + spread * u_g,   u_g ~ U(-1, 1)  draw = 'group': the G rollouts of prompt g share one draw
    frac_i = frac + spread * u_i,   u_i ~ U(-1, 1)  draw = 'rollout': each rollout draws its own

    A pure function of its arguments (rollout i belongs to group i // group_size), so arms of a sweep
    that share a seed and a step draw from the same stream.
    """
    if draw not in THRESHOLD_DRAWS:
        raise ConfigError.invalid("threshold_draw", draw, f"choose one of {THRESHOLD_DRAWS}")
    if draw == "fixed":
        return np.full(num_envs, float(frac))
    rng = np.random.default_rng([int(seed), _DRAW_STREAM])
    u = rng.uniform(-1.0, 1.0, size=num_envs // group_size if draw == "group" else num_envs)
    return float(frac) + float(spread) * (np.repeat(u, group_size) if draw == "group" else u)


def window_need(env: Any) -> tuple[int, int]:
    """(prompt tokens, tokens of one step) of a vector env, from its protocol metadata (or its
    observation width for a user's task that declares none)."""
    from simlab.harness.phases import protocol_metadata

    meta = protocol_metadata(env)
    width = int(env.single_observation_space.shape[0])
    return int(meta.get("prompt_tokens", width)), ACTION_TURN + 1 + int(meta.get("step_obs_tokens", width))


def check_window(env: Any, cfg: HarnessConfig) -> None:
    """Raise ``ConfigError`` unless ``cfg``'s window holds ``env``'s prompt, a summary and one step.

    The one window check: the config layer runs it before a run starts, the rollout loop on every
    env it is given.
    """
    cfg.check_fits(*window_need(env))
