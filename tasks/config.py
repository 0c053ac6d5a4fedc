"""Task configurations: one section per task, validated when built (see :mod:`simlab.schema`).

Each field has a docstring and a rule that says what it allows; :meth:`TaskConfig.check` holds the
rules that involve several fields. Errors name the key path, the bad value and the allowed range,
Optuna style: ``"`task.noise=1.5` is invalid; choose a value in [0, 1]"``.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Self

from pydantic import Field

from simlab.errors import ConfigError
from simlab.refusals import int_text
from simlab.rules import MinMax, Real, Unit
from simlab.schema import Section
from simlab.tasks import vocab

TOKENS = 4096
"""Largest vocabulary, horizon or observation length a task takes."""
Signed = Annotated[Real, Field(ge=-1, le=1)]
"""A knob in [-1, 1]."""
Length = Annotated[int, Field(ge=1, le=TOKENS)]
"""A length in tokens."""
Pair = Annotated[tuple[Length, Length], MinMax()]
"""A (min, max) pair of lengths, min <= max."""
Steps = Annotated[int, Field(ge=2, le=TOKENS)]
"""A number of steps before the query."""


class TaskConfig(Section):
    """Controls every simlab task has."""

    SECTION = "task"

    vocab_size: Annotated[int, Field(ge=vocab.FIRST_CONTENT + 1, le=TOKENS)] = 48
    """Total vocabulary V, specials included; content ids are 16..V-1."""
    horizon: Annotated[tuple[Steps, Steps], MinMax()] = (16, 24)
    """(min, max) steps before the query, drawn uniformly per instance."""
    obs_tokens: Pair = (4, 8)
    """(min, max) tokens per observation, drawn uniformly per step."""
    tail_prob: Unit = 0.0
    """Probability that a step's observation is a heavy-tail one of ``tail_tokens`` tokens."""
    tail_tokens: Annotated[int, Field(ge=1, le=TOKENS)] = 32
    """Length of a heavy-tail observation (makes the discard rule matter)."""
    noise: Unit = 0.0
    """Action slip: with this probability the env executes a random action instead of the chosen one."""
    hard_frac: Unit = 0.25
    """Fraction of instances made unsolvable except by chance (the decisive fact or link is withheld)."""
    compaction_reward_corr: Signed = 0.0
    """In [-1, 1]: >0 pads easy instances with extra distractor tokens (more compactions, more success),
    <0 pads the hard ones; |value| scales the padding. 0 pads nothing."""
    corr_pad_tokens: Annotated[int, Field(ge=0, le=TOKENS)] = 8
    """Extra distractor tokens per observation at ``|compaction_reward_corr| = 1``."""

    SUMMARY_MODES: ClassVar[tuple[str, ...]] = ("relevant", "recency", "oracle")
    """How this task's solver can summarise (the reference agents' modes, ``simlab.harness.agents.SUMMARY_MODES``):
    every task's solver has these three."""

    def summary_mode_refusal(self, mode: str) -> str | None:
        """Why this task's solver cannot summarise in ``mode`` under these settings, or None where it can."""
        if mode not in self.SUMMARY_MODES:
            return f"the task's solver summarises by {list(self.SUMMARY_MODES)}, not {mode!r}"
        return None

    def check(self) -> None:
        """The bounds that depend on the task's structure (``min_content``, ``min_obs_tokens``)."""
        least = vocab.FIRST_CONTENT + self.min_content()
        if self.vocab_size < least:
            raise self.invalid("vocab_size", int_text(least, TOKENS))
        shortest = self.min_obs_tokens()
        if self.obs_tokens[0] < shortest:
            raise self.invalid("obs_tokens", int_text(shortest, TOKENS), suffix="[0]")
        if self.tail_tokens < shortest:
            raise self.invalid("tail_tokens", int_text(shortest, TOKENS))

    def recheck(self) -> None:
        """Check every field again (a section is already checked when it is built)."""
        type(self)(**dict(self))

    @property
    def num_content(self) -> int:
        """Content tokens: the vocabulary beyond the specials."""
        return self.vocab_size - vocab.FIRST_CONTENT

    def min_content(self) -> int:
        """Fewest content tokens the task can work with."""
        return 4

    def min_obs_tokens(self) -> int:
        """Shortest observation that holds the task's structure."""
        return 2

    def max_obs_tokens(self) -> int:
        """Longest regular observation (before padding and heavy tail): what the window check assumes."""
        return int(self.obs_tokens[1])

    def max_burst_tokens(self) -> int:
        """Longest burst observation (0: the task has none). Like the heavy tail, bursts widen the
        observation but are left out of the window check: a harness meets them with its discard rule."""
        return 0

    def full_information(self) -> Self:
        """The task with nothing withheld (no hard instances): what ``base.teach = "full"`` demonstrates on."""
        return self.replace(hard_frac=0.0)


class KeyRecallConfig(TaskConfig):
    """The memory task: facts among distractors, one of them asked about at the end."""

    num_facts: Annotated[int, Field(ge=1, le=1024)] = 6
    """Facts per instance (distinct keys)."""
    fact_frac: Annotated[Real, Field(gt=0, le=1)] = 0.5
    """Facts appear in the first ``fact_frac`` of the horizon, so the asked one has left the window."""
    zipf: Annotated[Real, Field(ge=0, le=10)] = 1.2
    """Query prior: key of rank r (0 = lowest id) is asked with weight (r+1)^-zipf among the facts shown."""
    cue_reliability: Unit | None = None
    """A cue in the prompt names one of the facts: the asked one with probability rho, else a fact drawn
    uniformly (the asked one included), so P(cue = asked) = rho + (1 - rho) / num_facts; rho = 0 is an
    uninformative cue, the control. With a cue the facts' values are distinct. ``None``: no cue (the prompt
    and every draw as before)."""
    cue_at: Literal["prompt", "fact"] = "prompt"
    """Where the cue stands: ``prompt``, the cued key as the prompt's last token (keeping the right fact
    is a lookup by content: find the statement of that key); ``fact``, the cued fact stated as
    ``CUE key value`` instead of ``FACT key value`` (a local mark: keep the pair after it)."""
    distractors: bool = True
    """Whether key ids also stand where no fact is: the prompt's fact count (a content token, a key id where
    the keys outnumber the facts) and the filler, drawn from every content id (as before the setting existed).
    ``False``: the prompt carries no count and the filler only value ids (the same draws, folded onto them), so
    a key id in a context is a fact's, the cue's or the query's: the prompt cue is a plain lookup."""

    SUMMARY_MODES = (*TaskConfig.SUMMARY_MODES, "cued", "random")
    """Also ``cued`` (keep the fact the cue names) and ``random`` (facts in a random order)."""

    def full_information(self) -> KeyRecallConfig:
        """No hard instances, and with a cue, a cue that always names the asked fact (``cue_reliability = 1``):
        every cue dose teaches on the same task, so arms that differ only in the dose share a base model per
        seed under ``base.teach = "full"`` (the summariser experiments' paired design)."""
        full = super().full_information()
        return full if self.cue_reliability is None else full.replace(cue_reliability=1.0)

    def summary_mode_refusal(self, mode: str) -> str | None:
        """``cued`` keeps the fact the cue names, so it needs a cue."""
        if mode == "cued" and self.cue_reliability is None:
            return "it keeps the fact the cue names, and this task has none; set task.cue_reliability"
        return super().summary_mode_refusal(mode)

    def min_content(self) -> int:
        """Two content tokens per fact (a key and its value), for at least two facts."""
        return 2 * max(self.num_facts, 2)

    def min_obs_tokens(self) -> int:
        """``FACT key value``."""
        return 3

    def check(self) -> None:
        """One fact per step before the query: ``num_facts <= horizon[0] - 1``; a cue's placement needs a cue,
        and a cue needs every fact shown (a hidden asked fact would leave the cue naming nothing)."""
        if self.num_facts > self.horizon[0] - 1:
            raise self.invalid(
                "num_facts", f"choose an integer in [1, {self.horizon[0] - 1}] (horizon[0] - 1, one fact per step)"
            )
        if self.cue_at != "prompt" and self.cue_reliability is None:
            raise self.invalid("cue_at", "there is no cue to place; choose 'prompt' or set task.cue_reliability")
        if self.cue_reliability is not None and self.hard_frac > 0:
            raise self.invalid("hard_frac", "a cue needs every fact shown; choose 0 or leave task.cue_reliability "
                               "unset")
        super().check()


class PointerChaseConfig(TaskConfig):
    """The state task: follow a chain of links, keep a running sum, answer it at the end."""

    num_nodes: Annotated[int, Field(ge=2, le=1024)] = 12
    """Distinct nodes (content tokens) the chain walks over."""
    num_pairs: Annotated[int, Field(ge=1, le=64)] = 2
    """LINK pairs per table: one true, the rest distractors."""
    obs_tokens: Pair = (8, 10)
    """(min, max) tokens per observation; at least 1 + 3 * num_pairs (step index and links)."""

    def min_content(self) -> int:
        """One content token per node."""
        return max(self.num_nodes, 2)

    def min_obs_tokens(self) -> int:
        """The step index and ``num_pairs`` LINK triples."""
        return 2 + 3 * self.num_pairs


class PeekReadConfig(TaskConfig):
    """The behaviour-cost task: every step the agent peeks (a short observation) or reads (a long one).

    One fact ``FACT key value`` is stated at a step in the first ``fact_frac`` of the horizon; the last
    observation asks ``key QUERY``. Reads cost context, so a rollout that reads more compacts more;
    ``read_payoff`` sets what reading is worth.
    """

    obs_tokens: Pair = (3, 4)
    """(min, max) tokens of a peek (at least 3: a peek can hold ``FACT key value``)."""
    read_tokens: Pair = (12, 14)
    """(min, max) tokens of a read (at least 3 longer than a peek, so reading costs context)."""
    read_payoff: Signed = 1.0
    """In [-1, 1]: what reading is worth. > 0: the fact is in the read of its step, and a peek at that
    step shows it only with probability 1 - read_payoff (reading pays). < 0: peeks and reads both show
    the fact, and each later step (before the query) is a trap with probability |read_payoff|: reading
    there breaks the episode (long detours are traps). 0: peeks and reads carry the same fact and no
    step is a trap (the control: reading only costs context)."""
    fact_frac: Annotated[Real, Field(gt=0, le=1)] = 0.2
    """The fact opens the observation of a step in the first ``fact_frac`` of the horizon (at least the
    first step; the default keeps it there for horizons under 10)."""
    burst_prob: Unit = 0.0
    """Per rollout, the probability that a read at the fact step bursts: its output goes on over the next
    ``burst_steps`` observations, each ``burst_tokens`` long, whatever the agent does there. Drawn from the
    rollout's own stream, so the G rollouts of one prompt differ. 0: no bursts."""
    burst_steps: Annotated[int, Field(ge=1, le=TOKENS)] = 2
    """The burst's length in observations (cut short before the query). Under a threshold trigger with the
    discard rule, a burst observation longer than L - 8 forces one compaction each and is dropped."""
    burst_tokens: Annotated[int, Field(ge=1, le=TOKENS)] = 48
    """Tokens of each burst observation (distractor values; longer than any read)."""
    burst_restates: bool = True
    """The burst ends with a short observation that opens with the fact again (unless the coupling lost
    it), so a burst reader need not carry the fact through the burst's summaries and K alone goes with
    nothing at c = 0. False: the fact must survive the summaries, and the learned summariser couples K
    with reward by itself."""
    reread: bool = False
    """Look again: every read after the fact step opens with the fact too, so an agent whose summary lost
    the fact can recover it, at a read's cost in context. False: only the fact step states it."""
    coupling: Signed = 0.0
    """In [-1, 1]: how a burst goes with success on the read route (c). > 0: a burst read loses the fact
    with probability c (the long output buries it). < 0: a read without a burst loses it with probability
    |c| (a short output is truncated; the long one is complete). 0: a burst changes only the context spent
    (the control). Drawn from the rollout's stream."""

    def min_content(self) -> int:
        """Two action tokens, two keys, two values."""
        return 6

    def min_obs_tokens(self) -> int:
        """``FACT key value``."""
        return 3

    def max_obs_tokens(self) -> int:
        """The longer of a peek and a read."""
        return max(int(self.obs_tokens[1]), int(self.read_tokens[1]))

    def max_burst_tokens(self) -> int:
        """``burst_tokens`` when bursts are on."""
        return int(self.burst_tokens) if self.burst_prob > 0 else 0

    def full_information(self) -> PeekReadConfig:
        """No hard instances, peeks show the fact too (``read_payoff`` > 0 becomes 0), no fact lost to the
        coupling; traps, bursts and the geometry stay, so demonstrations compact as the task does."""
        return self.replace(hard_frac=0.0, read_payoff=min(self.read_payoff, 0.0), coupling=0.0)

    def check(self) -> None:
        """A read is at least 3 tokens longer than the longest peek; with bursts on, a burst is longer than
        any read and fits between the first step and the query."""
        super().check()
        least = self.obs_tokens[1] + 3
        if self.read_tokens[0] < least:
            raise self.invalid("read_tokens", int_text(least, TOKENS), suffix="[0]")
        if self.burst_prob > 0:
            if self.horizon[0] < 3 + int(self.burst_restates):
                raise self.invalid("burst_prob", "a burst needs a step between the fact and the query "
                                   f"(horizon[0] >= {3 + int(self.burst_restates)}); choose 0 or raise task.horizon")
            if self.burst_tokens <= self.read_tokens[1]:
                raise self.invalid("burst_tokens", int_text(self.read_tokens[1] + 1, TOKENS) + " (longer than a read)")
            room = self.horizon[0] - 2 - int(self.burst_restates)
            if self.burst_steps > room:
                raise self.invalid("burst_steps", int_text(1, room) + f" (horizon[0] - {self.horizon[0] - room}: "
                                   "the burst" + (" and its restatement" if self.burst_restates else "")
                                   + " end before the query)")


__all__ = ["ConfigError", "KeyRecallConfig", "PeekReadConfig", "PointerChaseConfig", "TaskConfig"]
