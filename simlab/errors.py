"""Every error simlab raises for bad input, and the one it raises when training diverges.

A neutral module: it imports nothing from simlab, so every layer (tasks up to analysis) raises the same
types. Bad input is a :class:`ConfigError`: it carries the full key path, the bad value and what is
allowed, and its message is one line in Optuna's style::

    `train.eps_low=0` is invalid; choose a value > 0

The command line turns any ``ConfigError`` into ``error: <message>`` and exit code 2. The subclasses
only say where the input came from (a sweep spec, a store option, a report's experiment, ...), so a
caller can catch one kind or all of them.
"""

from __future__ import annotations

import reprlib
from typing import Any, Self

_UNSET: Any = object()
_SHOWN = reprlib.Repr()
"""How an error shows the bad value: as ``repr`` does, shortened with ``...`` past what fits one line
(an integer of 400 digits, a list of 10,000 seeds); the error keeps the whole value."""
_SHOWN.maxlevel, _SHOWN.maxtuple, _SHOWN.maxlist, _SHOWN.maxdict, _SHOWN.maxset = 4, 20, 20, 12, 12
_SHOWN.maxstring, _SHOWN.maxlong, _SHOWN.maxother = 160, 60, 160


class ConfigError(Exception):
    """Bad input: names the key path, the bad value and what is allowed.

    Not a ``ValueError``: a ``ValueError`` from numpy, torch or simlab's own arithmetic is a bug, and the
    command line must not read it as the user's input.

    Build one with :meth:`invalid` (a value that is not allowed), :meth:`unknown` (a key that is not a
    setting) or, for a message that does not fit either form, with the message itself. ``key``,
    ``value`` and ``allowed`` are kept as attributes so that a caller can re-key the error
    (:meth:`under`) or name a different culprit without parsing the message; ``involves`` holds the key
    paths of the other settings the broken rule relates ``key`` to (a bare section name stands for all of
    its keys), so that a refusal of a value the user did not set names the user's setting it clashes with
    (:meth:`simlab.settings.Settings.blame`).
    """

    KEY: str = "a setting"
    """What a known key is called in :meth:`unknown`'s message."""

    def __init__(self, message: str, *, key: str | None = None, value: Any = _UNSET, allowed: str = "",
                 involves: tuple[str, ...] = ()) -> None:
        super().__init__(" ".join(message.split()))  # one line, whatever a library's message held
        self.key = key
        self.value = value
        self.allowed = allowed
        self.involves = involves

    @property
    def has_value(self) -> bool:
        """Whether the error carries the bad value (an unknown key carries none)."""
        return self.value is not _UNSET

    @classmethod
    def invalid(cls, key: str, value: Any, allowed: str, *, involves: tuple[str, ...] = ()) -> Self:
        """```key=value`` is invalid; allowed`` (``allowed`` reads "choose ..." or says why)."""
        return cls(f"`{key}={_SHOWN.repr(value)}` is invalid; {allowed}", key=key, value=value, allowed=allowed,
                   involves=involves)

    @classmethod
    def unknown(cls, key: str, choices: Any) -> Self:
        """```key`` is not a setting; choose one of ...`` (``a spec key`` for a spec)."""
        allowed = f"choose one of {list(choices)}"
        return cls(f"`{key}` is not {cls.KEY}; {allowed}", key=key, allowed=allowed)

    def under(self, prefix: str) -> ConfigError:
        """The same error with its key path under ``prefix`` (``window`` -> ``harness.window``)."""
        if self.key is None or not prefix or self.key.startswith(prefix + "."):
            return self
        key = f"{prefix}.{self.key}"
        if self.has_value:
            return type(self).invalid(key, self.value, self.allowed, involves=self.involves)
        message = str(self).replace(f"`{self.key}`", f"`{key}`", 1)
        return type(self)(message, key=key, allowed=self.allowed)


class UnknownNameError(ConfigError):
    """A name that no registry holds (estimator, normaliser, trigger, agent, ...); lists the valid ones."""


class SpecError(ConfigError):
    """A sweep spec is invalid; the message names the key and what is allowed."""

    KEY = "a spec key"


class StoreError(ConfigError):
    """A store cannot be used; the message names the option, the value, what is allowed and the fix."""


class BackendError(ConfigError):
    """The named trial backend cannot be loaded."""


class OutputDirError(ConfigError):
    """An output folder does not exist or cannot be written."""


class ReportError(ConfigError):
    """Bad input for a report: no such experiment, no finished run, an unknown baseline."""


class FindingsError(ConfigError):
    """A findings row or an export is malformed; the message names the file and the key."""

    KEY = "a findings key"


class AuditDataError(ConfigError):
    """The published-results data is malformed; the message names the entry and the key."""


class RowsError(ConfigError):
    """A trainer's rows cannot be read as rollouts (a row key, the response mask, the rewards, a batch file)."""


class BaseGateError(ConfigError):
    """The base model missed the base-quality gate (``base.min_gain``): the run stops before RL, exit 2."""


class TrainingDiverged(RuntimeError):
    """A loss, gradient or the policy's logits became NaN or infinite; nothing was written after it."""


__all__ = [
    "AuditDataError",
    "BackendError",
    "BaseGateError",
    "ConfigError",
    "FindingsError",
    "OutputDirError",
    "ReportError",
    "RowsError",
    "SpecError",
    "StoreError",
    "TrainingDiverged",
    "UnknownNameError",
]
