"""Named registries: every estimator, normaliser, lambda reading, trigger and summariser lives in one.

Sweeps and configs address components by these snake_case names, so an unknown name must fail loudly
and say what the valid names are. Aliases (for example verl's ``loss_agg_mode`` spellings) resolve to
a canonical name and are accepted wherever a name is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from simlab.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """A mapping from snake_case names (and aliases) to components of one kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str, *, aliases: tuple[str, ...] = ()) -> Callable[[T], T]:
        """Decorator: register ``obj`` under ``name`` and any ``aliases``."""

        def add(obj: T) -> T:
            self.add(name, obj, aliases=aliases)
            return obj

        return add

    def add(self, name: str, obj: T, *, aliases: tuple[str, ...] = ()) -> None:
        """Register ``obj`` under ``name`` and ``aliases``; a name taken already is an error."""
        for key in (name, *aliases):
            if key in self._items or key in self._aliases:
                raise ValueError(f"{self.kind} {key!r} is already registered")
        self._items[name] = obj
        for alias in aliases:
            self._aliases[alias] = name

    def canonical(self, name: str, key: str | None = None) -> str:
        """The canonical name for ``name`` or one of its aliases; ``key`` names the setting in an error
        (default: the registry's kind)."""
        if isinstance(name, str) and name in self._items:
            return name
        if isinstance(name, str) and name in self._aliases:
            return self._aliases[name]
        raise UnknownNameError.invalid(key or self.kind, name, f"choose one of {self.choices()}")

    def get(self, name: str, key: str | None = None) -> T:
        """The component registered as ``name`` (or an alias of it)."""
        return self._items[self.canonical(name, key)]

    def names(self) -> tuple[str, ...]:
        """Canonical names, in registration order."""
        return tuple(self._items)

    def aliases(self) -> dict[str, str]:
        """Alias -> canonical name."""
        return dict(self._aliases)

    def choices(self) -> str:
        """Every name (and alias) quoted, for an error message."""
        listed = ", ".join(repr(n) for n in self._items)
        if self._aliases:
            listed += " (aliases: " + ", ".join(f"{a!r} -> {c!r}" for a, c in self._aliases.items()) + ")"
        return listed

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._items or name in self._aliases)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
