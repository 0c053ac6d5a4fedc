"""The harness configuration: one frozen dataclass, validated in one place."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from simlab.tasks import vocab
from simlab.tasks.config import ConfigError, check_choice, check_float, check_int


@dataclass(frozen=True)
class HarnessConfig:
    """How the harness builds contexts and compacts them (the published loops as settings)."""

    window: int = 128
    """W: the working window, in tokens, that the agent sees."""
    trigger: str = "threshold"
    """When to compact: a name in ``simlab.harness.TRIGGERS``."""
    frac: float = 0.8
    """L = floor(frac * W): the length threshold of ``threshold``, ``policy`` and ``sliding`` (SUPO)."""
    t_comp: int = 24
    """``budget`` compacts when W - context < t_comp (CompactionRL's T_comp)."""
    chunk_steps: int = 4
    """``chunked`` compacts every this many steps (MemAgent)."""
    discard: bool = True
    """SUPO's discard rule: the step that pushed the context over the threshold is not summarised.
    Its action is never optimised (its context is gone); it is replayed verbatim as the newest tail
    step when ``tail_steps >= 1`` and fits, and lost otherwise (as in SUPO)."""
    tail_steps: int = 1
    """k: steps kept verbatim after a compaction (shrunk to fit)."""
    summary_tokens: int = 8
    """m: tokens the summariser writes."""
    max_compactions: int = 4
    """S: compactions allowed per rollout; needing one more ends the rollout as overlong."""
    max_steps: int = 64
    """H: env steps allowed per rollout (the answer included); reaching it unanswered is overlong."""
    summariser: str = "self"
    """Who writes summaries: ``self`` (the agent), ``none`` (compaction drops history without a
    summary) or a reference agent's name (a separate frozen summariser, e.g. ``oracle``)."""
    v_sum: str = "v1"
    """Version of the summarisation instruction; stored with every rollout batch."""

    def __post_init__(self) -> None:
        self.validate()

    @property
    def threshold(self) -> int:
        """L in tokens."""
        return math.floor(self.frac * self.window)

    @property
    def v_sum_tokens(self) -> tuple[int, ...]:
        return vocab.v_sum(self.v_sum)

    @property
    def effective_horizon(self) -> int:
        """L x (S + 1): the most context a rollout can consume across its segments (SUPO)."""
        return self.threshold * (self.max_compactions + 1)

    def validate(self, prefix: str = "harness") -> None:
        """Every range check on this config; errors name the key and the allowed range."""
        from simlab.harness.agents import AGENTS
        from simlab.harness.triggers import TRIGGERS

        check_int(f"{prefix}.window", self.window, 8)
        TRIGGERS.canonical(self.trigger)
        check_float(f"{prefix}.frac", self.frac, 0.0, 1.0, lo_open=True)
        # t_comp only has to fit the window when the budget trigger reads it
        budget = TRIGGERS.canonical(self.trigger) == "budget"
        check_int(f"{prefix}.t_comp", self.t_comp, 1, self.window - 1 if budget else None)
        check_int(f"{prefix}.chunk_steps", self.chunk_steps, 1)
        if not isinstance(self.discard, bool):
            raise ConfigError(f"`{prefix}.discard={self.discard!r}` is invalid; choose True or False")
        check_int(f"{prefix}.tail_steps", self.tail_steps, 0)
        check_int(f"{prefix}.summary_tokens", self.summary_tokens, 0)
        check_int(f"{prefix}.max_compactions", self.max_compactions, 0)
        check_int(f"{prefix}.max_steps", self.max_steps, 1)
        if self.summariser not in ("self", "none", "frozen"):
            try:
                AGENTS.canonical(self.summariser)
            except ValueError:
                raise ConfigError(
                    f"`{prefix}.summariser={self.summariser!r}` is invalid; choose 'self', "
                    f"'none', 'frozen' (a frozen policy checkpoint) or one of {AGENTS.choices()}"
                ) from None
        check_choice(f"{prefix}.v_sum", self.v_sum, vocab.V_SUM_VERSIONS)

    def check_fits(self, prompt_tokens: int, step_tokens: int, prefix: str = "harness") -> None:
        """The window (and L, for length triggers) must hold the prompt, a summary and one step."""
        from simlab.harness.triggers import TRIGGERS

        need = 1 + prompt_tokens + 1 + self.summary_tokens + step_tokens
        if self.window < need:
            raise ConfigError(
                f"`{prefix}.window={self.window}` is invalid; it cannot hold the prompt "
                f"({1 + prompt_tokens}), a summary ({1 + self.summary_tokens}) and one step "
                f"({step_tokens}); choose an integer >= {need}"
            )
        trig = TRIGGERS.get(self.trigger)
        limit = trig.limit(self)
        if trig.kind != "never" and trig.length_based and limit < need:
            key, value = ("t_comp", self.t_comp) if trig.name == "budget" else ("frac", self.frac)
            raise ConfigError(
                f"`{prefix}.{key}={value!r}` is invalid; the trigger limit {limit} tokens cannot hold the "
                f"prompt, a summary and one step ({need} tokens); raise it so the limit is >= {need}"
            )
        room = limit + len(self.v_sum_tokens) + self.summary_tokens
        if trig.kind == "summary" and trig.length_based and room > self.window:
            key, value = ("t_comp", self.t_comp) if trig.name == "budget" else ("frac", self.frac)
            raise ConfigError(
                f"`{prefix}.{key}={value!r}` is invalid; the trigger limit {limit} + v_sum "
                f"({len(self.v_sum_tokens)}) + summary ({self.summary_tokens}) exceeds the window "
                f"{self.window}, so no summary could be written; lower it so the limit is "
                f"<= {self.window - len(self.v_sum_tokens) - self.summary_tokens}"
            )

    def as_dict(self) -> dict[str, Any]:
        """Every field by name, for logging with the run."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def replace(self, **changes: Any) -> HarnessConfig:
        names = {f.name for f in fields(self)}
        for key in changes:
            if key not in names:
                raise ConfigError(f"`harness.{key}` is not a harness setting; choose one of {sorted(names)}")
        return HarnessConfig(**{**{f.name: getattr(self, f.name) for f in fields(self)}, **changes})
