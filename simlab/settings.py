"""A run's settings as layers: each a plain mapping of key paths, merged once, each value remembering its layer.

The layers of one run, lowest first (:func:`simlab.config.build` makes them)::

    defaults     the sections' own field defaults (no layer object: a key no layer sets is a default)
    derived      what the config layer computes from other settings (policy.max_len from harness.window)
    preset       the task preset's calibrated settings            "preset 'peekread-long-k8'"
    recipe       the recipe's harness and train settings           "train.recipe='supo'"
    user         the user's own: a file, then ``--set``, or a sweep cell (one or more layers)
    smoke        ``$SIMLAB_SMOKE``'s size caps                     (:mod:`simlab.smoke`)

A higher layer wins. A layer derived from others (a recipe derives supo's L = 0.95 W from the window)
lists the key paths it ``reads``, so a refusal of a derived value names the user's setting it came
from. A check that relates several settings names the others in its error's ``involves``
(:class:`~simlab.errors.ConfigError`), so a refusal of a value the user did not set names the user's
setting it clashes with. :meth:`Settings.blame` does both: the advice comes from the layer that set the
value, never from a search for a value that would work.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from simlab.errors import ConfigError

USER = "user"
"""The kind of every layer a user wrote (a file, ``--set``, a sweep spec's cell)."""
KINDS = ("derived", "preset", "recipe", USER, "smoke")
"""Layer kinds, lowest first."""


@dataclass(frozen=True)
class Layer:
    """One layer of settings: ``values`` by key path (``harness.window``), named for a refusal by ``label``."""

    kind: str
    """One of :data:`KINDS`."""
    label: str
    """How a refusal names the layer: ``preset 'keyrecall-tiny'``, ``--set``, ``run.toml``."""
    values: Mapping[str, Any] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    """Key paths this layer's values were computed from (a recipe's derivations); empty for a written layer."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"layer kind {self.kind!r} is not one of {KINDS}")

    @classmethod
    def of(cls, kind: str, label: str, sections: Mapping[str, Mapping[str, Any]], *,
           reads: Iterable[str] = ()) -> Layer:
        """A layer from ``{section: {field: value}}`` (a preset's or a recipe's tables)."""
        values = {f"{name}.{key}": value for name, table in sections.items() for key, value in table.items()}
        return cls(kind, label, values, tuple(reads))


class Settings:
    """Layers in order, merged: the value of each key path and the layer that set it."""

    def __init__(self, layers: Iterable[Layer] = ()) -> None:
        self.layers: list[Layer] = []
        for layer in layers:
            self.add(layer)

    def add(self, layer: Layer) -> None:
        """Put ``layer`` in its place: above every layer of a lower or equal kind, below the rest."""
        rank = KINDS.index(layer.kind)
        at = next((i for i, have in enumerate(self.layers) if KINDS.index(have.kind) > rank), len(self.layers))
        self.layers.insert(at, layer)

    def origin(self, key: str) -> Layer | None:
        """The layer that set ``key`` (the highest that has it); ``None`` for a default."""
        return next((layer for layer in reversed(self.layers) if key in layer.values), None)

    def section(self, name: str, *, below: str | None = None) -> dict[str, Any]:
        """The merged settings of section ``name`` by field; ``below`` a kind: only the layers under it."""
        out: dict[str, Any] = {}
        for layer in self.layers:
            if below is not None and KINDS.index(layer.kind) >= KINDS.index(below):
                break
            for path, value in layer.values.items():
                section, _, key = path.partition(".")
                if section == name and key:
                    out[key] = value
        return out

    def get(self, key: str, default: Any = None) -> Any:
        """The value of key path ``key`` (the highest layer's), ``default`` where no layer sets it."""
        layer = self.origin(key)
        return default if layer is None else layer.values[key]

    def user_keys(self, wanted: Iterable[str]) -> list[str]:
        """The key paths among ``wanted`` that a user layer set; a bare section name (``task``) stands for
        every key under it."""
        out: list[str] = []
        for want in wanted:
            for layer in self.layers:
                if layer.kind == USER:
                    out += [k for k in layer.values if (k == want or k.startswith(want + ".")) and k not in out]
        return [k for k in out if (origin := self.origin(k)) is not None and origin.kind == USER]

    def blame(self, exc: ConfigError) -> ConfigError:
        """``exc`` said to the user: unchanged when a user layer set its key (or it names none); else
        re-keyed to the user's setting its value was derived from or clashes with, naming the layer
        that set it; else (nothing the user set is involved) naming that layer and how to override it."""
        key = (exc.key or "").split("[")[0]
        layer = self.origin(key)
        if layer is None or layer.kind == USER or not exc.has_value:
            return exc
        derived = f"{layer.label} derives {key}={exc.value!r} from it"
        clash = f"it clashes with {key}={exc.value!r} (set by {layer.label})"
        for mine, how in ((self.user_keys(layer.reads), derived), (self.user_keys(exc.involves), clash)):
            if mine:  # the user's setting it was derived from, else the one it clashes with
                why = (f"{how}; for {key}: {exc.allowed}; change {mine[0]} (set in {self._origin_label(mine[0])}) "
                       f"or set {key} yourself")
                return type(exc).invalid(mine[0], self.get(mine[0]), why)
        why = f"{exc.allowed} ({key} is set by {layer.label}; set it yourself to override it)"
        return type(exc).invalid(exc.key or key, exc.value, why)

    def _origin_label(self, key: str) -> str:
        layer = self.origin(key)
        return layer.label if layer is not None else "the defaults"


__all__ = ["KINDS", "USER", "Layer", "Settings"]
