"""Task configurations (frozen dataclasses) and the validation helpers every simlab config uses.

Each field has a docstring; ``validate`` is the one place that checks them. Errors name the key path,
the bad value and the allowed range, Optuna style: ``"`task.noise=1.5` is invalid; choose ..."``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from numbers import Integral, Real
from typing import Any

from simlab.tasks import vocab


class ConfigError(ValueError):
    """A configuration value is out of range; the message names the key path and the allowed range."""


def check_int(path: str, value: Any, lo: int, hi: int | None = None) -> None:
    """Raise ``ConfigError`` unless ``value`` is an integer in ``[lo, hi]``."""
    ok = isinstance(value, Integral) and not isinstance(value, bool)
    if ok and value >= lo and (hi is None or value <= hi):
        return
    allowed = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
    raise ConfigError(f"`{path}={value!r}` is invalid; choose {allowed}")


def check_float(
    path: str, value: Any, lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False
) -> None:
    """Raise ``ConfigError`` unless ``value`` is a finite real in the stated interval."""
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if ok:
        v = float(value)
        ok = (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok:
        interval = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        raise ConfigError(f"`{path}={value!r}` is invalid; choose a value in {interval}")


def check_range_pair(path: str, value: Any, lo: int, hi: int | None = None) -> None:
    """A ``(min, max)`` pair of integers with ``lo <= min <= max (<= hi)``."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise ConfigError(f"`{path}={value!r}` is invalid; give a (min, max) pair of integers")
    check_int(f"{path}[0]", value[0], lo, hi)
    check_int(f"{path}[1]", value[1], int(value[0]), hi)


def check_choice(path: str, value: Any, choices: tuple[Any, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"`{path}={value!r}` is invalid; choose one of {choices}")


@dataclass(frozen=True)
class TaskConfig:
    """Controls every simlab task has."""

    vocab_size: int = 48
    """Total vocabulary V, specials included; content ids are 16..V-1."""
    horizon: tuple[int, int] = (16, 24)
    """(min, max) steps before the query, drawn uniformly per instance."""
    obs_tokens: tuple[int, int] = (4, 8)
    """(min, max) tokens per observation, drawn uniformly per step."""
    tail_prob: float = 0.0
    """Probability that a step's observation is a heavy-tail one of ``tail_tokens`` tokens."""
    tail_tokens: int = 32
    """Length of a heavy-tail observation (makes the discard rule matter)."""
    noise: float = 0.0
    """Action slip: with this probability the env executes a random action instead of the chosen one."""
    hard_frac: float = 0.25
    """Fraction of instances made unsolvable except by chance (the decisive fact or link is withheld)."""
    compaction_reward_corr: float = 0.0
    """In [-1, 1]: >0 pads easy instances with extra distractor tokens (more compactions, more success),
    <0 pads the hard ones; |value| scales the padding. 0 pads nothing."""
    corr_pad_tokens: int = 8
    """Extra distractor tokens per observation at ``|compaction_reward_corr| = 1``."""

    def validate(self, prefix: str = "task") -> None:
        """Check every field; the one place task controls are validated."""
        check_int(f"{prefix}.vocab_size", self.vocab_size, vocab.FIRST_CONTENT + self.min_content(), 4096)
        check_range_pair(f"{prefix}.horizon", self.horizon, 2, 4096)
        check_range_pair(f"{prefix}.obs_tokens", self.obs_tokens, self.min_obs_tokens(), 4096)
        check_float(f"{prefix}.tail_prob", self.tail_prob, 0.0, 1.0)
        check_int(f"{prefix}.tail_tokens", self.tail_tokens, self.min_obs_tokens(), 4096)
        check_float(f"{prefix}.noise", self.noise, 0.0, 1.0)
        check_float(f"{prefix}.hard_frac", self.hard_frac, 0.0, 1.0)
        check_float(f"{prefix}.compaction_reward_corr", self.compaction_reward_corr, -1.0, 1.0)
        check_int(f"{prefix}.corr_pad_tokens", self.corr_pad_tokens, 0, 4096)

    @property
    def num_content(self) -> int:
        return self.vocab_size - vocab.FIRST_CONTENT

    def min_content(self) -> int:
        """Fewest content tokens the task can work with."""
        return 4

    def min_obs_tokens(self) -> int:
        """Shortest observation that holds the task's structure."""
        return 2

    def replace(self, **changes: Any) -> TaskConfig:
        """A copy with ``changes`` applied and validated; unknown keys name the valid ones."""
        names = {f.name for f in fields(self)}
        for key in changes:
            if key not in names:
                raise ConfigError(
                    f"`task.{key}` is not a field of {type(self).__name__}; choose one of {sorted(names)}"
                )
        kwargs = {f.name: getattr(self, f.name) for f in fields(self)}
        for key, value in changes.items():
            kwargs[key] = tuple(value) if isinstance(value, list) else value
        new = type(self)(**kwargs)
        new.validate()
        return new


@dataclass(frozen=True)
class KeyRecallConfig(TaskConfig):
    """The memory task: facts among distractors, one of them asked about at the end."""

    num_facts: int = 6
    """Facts per instance (distinct keys)."""
    fact_frac: float = 0.5
    """Facts appear in the first ``fact_frac`` of the horizon, so the asked one has left the window."""
    zipf: float = 1.2
    """Query prior: key of rank r (0 = lowest id) is asked with weight (r+1)^-zipf among the facts shown."""

    def min_content(self) -> int:
        return 2 * max(self.num_facts, 2) if isinstance(self.num_facts, int) else 4

    def min_obs_tokens(self) -> int:
        return 3  # FACT key value

    def validate(self, prefix: str = "task") -> None:
        check_int(f"{prefix}.num_facts", self.num_facts, 1, 1024)
        super().validate(prefix)
        check_float(f"{prefix}.fact_frac", self.fact_frac, 0.0, 1.0, lo_open=True)
        check_float(f"{prefix}.zipf", self.zipf, 0.0, 10.0)
        if self.num_facts > self.horizon[0] - 1:
            raise ConfigError(
                f"`{prefix}.num_facts={self.num_facts}` is invalid; choose an integer in "
                f"[1, {self.horizon[0] - 1}] (horizon[0] - 1, one fact per step)"
            )


@dataclass(frozen=True)
class PointerChaseConfig(TaskConfig):
    """The state task: follow a chain of links, keep a running sum, answer it at the end."""

    num_nodes: int = 12
    """Distinct nodes (content tokens) the chain walks over."""
    num_pairs: int = 2
    """LINK pairs per table: one true, the rest distractors."""
    obs_tokens: tuple[int, int] = (8, 10)
    """(min, max) tokens per observation; at least 1 + 3 * num_pairs (step index and links)."""

    def min_content(self) -> int:
        return max(self.num_nodes, 2) if isinstance(self.num_nodes, int) else 4

    def min_obs_tokens(self) -> int:
        return 2 + 3 * self.num_pairs if isinstance(self.num_pairs, int) else 2

    def validate(self, prefix: str = "task") -> None:
        check_int(f"{prefix}.num_nodes", self.num_nodes, 2, 1024)
        check_int(f"{prefix}.num_pairs", self.num_pairs, 1, 64)
        super().validate(prefix)
