"""What a sweep trial runs: a :class:`TrialBackend` turns settings into a config and trains it.

The runner only knows this interface, so it can be exercised end to end on a small trial function as
well as on simlab's trainer. A backend is named by an import path (``module:attribute``) so that worker
processes can load it themselves instead of unpickling closures.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simlab.sinks import MetricSink

DEFAULT_BACKEND = "simlab.sweep.backend:SIMLAB"


@dataclass(frozen=True)
class TrialBackend:
    """The four things a sweep needs from a trainer."""

    build: Callable[[dict[str, Any], int], Any]
    """(settings, seed) -> resolved config. ``settings`` holds ``preset``, ``recipe`` and key paths;
    raises ``ValueError`` naming the bad key path."""
    flatten: Callable[[Any], dict[str, Any]]
    """Resolved config -> ``{"section.key": scalar}``, logged as MLflow params."""
    tags: Callable[[Any], dict[str, str]]
    """Resolved config -> searchable tags (recipe, estimator names, v_sum version)."""
    train: Callable[[Any, MetricSink, Path], dict[str, float]]
    """(config, sink, store folder) -> final metrics (the objective among them); metrics go to the sink."""
    prepare: Callable[[list[Any], Path], None] | None = None
    """Build what trials share (the cached base checkpoints) once, in the coordinator, before any trial."""


class BackendError(ValueError):
    """The named trial backend cannot be loaded."""


def load_backend(path: str) -> TrialBackend:
    """Import ``module:attribute`` and check it is a :class:`TrialBackend`."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise BackendError(f"`trial={path!r}` is invalid; give 'module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendError(f"`trial={path!r}` cannot be imported: {exc}") from None
    backend = getattr(module, attr, None)
    if not isinstance(backend, TrialBackend):
        raise BackendError(f"`trial={path!r}` is not a TrialBackend (found {type(backend).__name__})")
    return backend


def _trainer_modules() -> tuple[Any, Any]:
    try:
        config = importlib.import_module("simlab.config")
        train = importlib.import_module("simlab.train")
    except ImportError as exc:
        raise BackendError(f"simlab's trainer is not available in this checkout ({exc})") from None
    return config, train


def _simlab_build(settings: dict[str, Any], seed: int) -> Any:
    config, _ = _trainer_modules()
    overrides = dict(settings)
    # the spec's top-level names map onto the run config's key paths
    for top, path in (("preset", "task.preset"), ("recipe", "train.recipe")):
        if top in overrides:
            overrides[path] = overrides.pop(top)
    overrides["seed"] = seed
    return config.resolve(config.apply_overrides({}, overrides))


def _simlab_flatten(cfg: Any) -> dict[str, Any]:
    config, _ = _trainer_modules()
    return dict(config.flatten(cfg))


def _simlab_tags(cfg: Any) -> dict[str, str]:
    flat = _simlab_flatten(cfg)
    wanted = (
        "recipe",
        "estimator",
        "normaliser",
        "lam",
        "overlong_mask",
        "v_sum",
        "summariser",
        "trigger",
        "preset",
    )
    return {f"simlab.{k}": str(v) for k, v in flat.items() if k.rsplit(".", 1)[-1] in wanted}


def _simlab_train(cfg: Any, sink: MetricSink, store: Path) -> dict[str, float]:
    _, train = _trainer_modules()
    return dict(train.train(cfg, sink, store=store))


def _simlab_prepare(cfgs: list[Any], store: Path) -> None:
    from tqdm import tqdm

    _, train = _trainer_modules()
    seen: set[str] = set()
    for cfg in cfgs:
        if cfg.base_key() in seen:  # one per task preset and base config, cached on disk
            continue
        seen.add(cfg.base_key())
        # delay: a cached checkpoint returns at once and shows no bar
        with tqdm(total=cfg.base.steps, desc=f"base checkpoint {cfg.preset}", unit="step", delay=2) as bar:
            train.base_checkpoint(cfg, store, progress=bar.update)


SIMLAB = TrialBackend(
    build=_simlab_build,
    flatten=_simlab_flatten,
    tags=_simlab_tags,
    train=_simlab_train,
    prepare=_simlab_prepare,
)
"""simlab's own trainer: ``simlab.config.resolve`` and ``simlab.train.train``."""
