"""A variant label: a sweep cell's settings written as one string, read back, and an older label read.

A label spells each swept setting by its key path, as ``--set`` and a spec do
(``train.estimator=rollout_group,train.normaliser=token``), sorted by key, with ``variant=<name>`` for a
spec's ``[[variants]]`` bundle. It is what ``simlab report`` pools seeds over, what a sweep's ``baseline``
names and what a finding's arms select from.

Runs logged before labels used key paths carry leaf keys (``normaliser=token``); :func:`canonical_label`
reads such a label given the key paths it can stand for (a spec's axes, or a run's logged params), so an
old store and a new one group the same runs under the same label.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simlab import names

BASE_VARIANT = "base"
"""The variant of a sweep without a search space (seeds only)."""
VARIANT_KEY = "variant"
"""The Optuna parameter of a spec's ``[[variants]]`` bundle, and its key in a label (a reserved name, never a
config key path)."""


def label(params: Mapping[str, Any]) -> str:
    """The label of a point of the space: ``key=value`` per swept key path, sorted, comma-joined."""
    return ",".join(f"{k}={v}" for k, v in sorted(params.items())) or BASE_VARIANT


def parse_label(text: str) -> dict[str, str]:
    """A label's settings as printed, in its order. A value that contains commas (``[8, 8]``) is kept
    whole: a part that is no ``key=value`` (or starts with a space) continues the value before it."""
    out: dict[str, str] = {}
    key = None
    for part in text.split(","):
        if "=" in part and not part.startswith(" "):
            key, value = part.split("=", 1)
            out[key] = value
        elif key is not None:
            out[key] += "," + part
    return out


def leaf(key: str) -> str:
    """A key path's last part (``train.normaliser`` -> ``normaliser``): what an older label wrote."""
    return key.rsplit(".", 1)[-1]


def leaf_paths(key: str, paths: Iterable[str]) -> list[str]:
    """The key paths among ``paths`` that ``key``, as an older label wrote it, can stand for: none where
    ``key`` is one of them or the variant key."""
    paths = list(paths)
    return [] if key in paths or key == VARIANT_KEY else [path for path in paths if leaf(path) == key]


def canonical_label(text: str, known: Mapping[str, str | None]) -> str:
    """``text`` with each leaf key replaced by the key path it stands for among ``known`` (key path -> its
    value as a label prints it, or ``None`` when any value will do), re-sorted. Where two key paths share
    the leaf (``base.lr``, ``train.lr``), the one holding the label's value; a key that stands for no
    single path, the variant key and a key path stay as written, so a label spelt by key paths comes back
    unchanged."""
    found: dict[str, str] = {}
    for key, value in parse_label(text).items():
        paths = leaf_paths(key, known)
        if len(paths) > 1:
            paths = [p for p in paths if known[p] is None or known[p] == value]
        found[paths[0] if len(paths) == 1 else key] = value
    return label(found) if found else text


def stored_variant(tags: Mapping[str, str], params: Mapping[str, str]) -> str | None:
    """A logged trial's label by key path: its variant tag (its cell tag less the seed, for runs logged
    before the tag existed), an older label's leaf keys read against the run's logged config params;
    ``None`` when the run has neither tag."""
    text = tags.get(names.VARIANT_TAG)
    if text is None and names.CELL_TAG in tags:
        cell = parse_label(tags[names.CELL_TAG])
        text = label({k: v for k, v in cell.items() if k != "seed"})
    return None if text is None else canonical_label(text, params)


def respelt(text: str, variants: Sequence[str]) -> str | None:
    """The label among ``variants`` that ``text`` spells with leaf keys (``normaliser=token`` for
    ``train.normaliser=token``), so a refusal can name the one to write; ``None`` if there is none."""
    keys: dict[str, str | None] = {key: None for variant in variants for key in parse_label(variant)}
    got = canonical_label(text, keys)
    return got if got != text and got in variants else None


LEAF_KEYS = "a label spells each setting by its key path, as --set does"
"""Why a label with leaf keys is refused: said beside the label to write."""
