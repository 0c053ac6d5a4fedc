"""What a sweep trial runs: a :class:`TrialBackend` turns settings into a config and trains it.

The runner only knows this interface, so it can be exercised end to end on a small trial function as
well as on simlab's trainer. A backend is named by an import path (``module:attribute``) so that worker
processes can load it themselves instead of unpickling closures.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simlab import names
from simlab.errors import BackendError
from simlab.sinks import MetricSink

if TYPE_CHECKING:
    from simlab.config import RunConfig
    from simlab.sweep.space import Cell
    from simlab.sweep.spec import SpecLayer, SweepSpec

DEFAULT_BACKEND = "simlab.sweep.backend:SIMLAB"
SWEEP_SEEDS = {"base.seed": "run", "eval.seed": "run"}
"""What a sweep's seeds vary unless its spec says otherwise: each seed gets its own base model and its own
held-out set (the arms of one seed still share both, so differences stay paired), so that "n seeds"
describes the task rather than one base model on one set of instances. A spec that holds either fixed
sets it in ``[base]`` and says why in its header."""


@dataclass(frozen=True)
class TrialBackend:
    """The four things a sweep needs from a trainer."""

    build: Callable[[list[SpecLayer], int], Any]
    """(layers, seed) -> resolved config. ``layers`` are the cell's settings, lowest first, each ``(label,
    {key path: value})`` (:meth:`~simlab.sweep.spec.SweepSpec.layers`; :func:`~simlab.sweep.spec.merged`
    gives the settings a backend that names no layer reads); raises :class:`~simlab.errors.ConfigError`
    naming the bad key path (and, for simlab's, the layer that set a value the cell did not)."""
    flatten: Callable[[Any], dict[str, Any]]
    """Resolved config -> ``{"section.key": scalar}``, logged as MLflow params."""
    tags: Callable[[Any], dict[str, str]]
    """Resolved config -> searchable tags (recipe, estimator names, v_sum version)."""
    train: Callable[[Any, MetricSink, Path], dict[str, float]]
    """(config, sink, store folder) -> final metrics (the objective among them); metrics go to the sink."""
    check_metric: Callable[[str, str, Any], None] | None = None
    """(key, metric name, resolved config): raise :class:`~simlab.errors.ConfigError` naming ``key`` when
    ``train`` can never return that metric for that config (a misspelt objective, one of an evaluation the
    config does not play), before any trial; ``None`` checks nothing."""
    prepare: Callable[[list[Any], Path, int], None] | None = None
    """(configs, store folder, workers): build what trials share (the cached base checkpoints) once, in
    the coordinator, on up to ``workers`` processes, before any trial."""

    def config(self, spec: SweepSpec, cell: Cell) -> Any:
        """The resolved config of one cell of ``spec``: its settings at the cell's point, for its seed."""
        return self.build(spec.layers(cell.params), cell.seed)


def load_backend(path: str) -> TrialBackend:
    """Import ``module:attribute`` and check it is a :class:`TrialBackend`."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise BackendError.invalid("--trial", path, "give 'module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendError.invalid("--trial", path, f"it cannot be imported ({exc})") from None
    backend = getattr(module, attr, None)
    if not isinstance(backend, TrialBackend):
        raise BackendError.invalid("--trial", path, f"it is not a TrialBackend (found {type(backend).__name__})")
    return backend


def _simlab_build(layers: list[SpecLayer], seed: int) -> RunConfig:
    """The cell's run config: validated once per process and cell (:func:`_resolved`), so that the check
    before the sweep, the shared base checkpoints and the trial itself share one validation."""
    from simlab import smoke

    return _resolved(json.dumps([layers, seed, smoke.on()], sort_keys=True))


@functools.lru_cache(maxsize=4096)
def _resolved(cell: str) -> RunConfig:
    """The run config of a cell given as ``[layers, seed, smoke size]`` in JSON (a sweep spec's values are
    TOML's, so JSON holds them): :data:`SWEEP_SEEDS` under the spec's layers, the cell's seed above them;
    a refusal is raised each time, not kept."""
    from simlab.config import build, paths_layer

    layers, seed, _ = json.loads(cell)
    values = [("the sweep's seeds", SWEEP_SEEDS), *layers, ("the cell's seed", {"seed": seed})]
    return build([paths_layer(settings, label) for label, settings in values])


def _simlab_flatten(cfg: RunConfig) -> dict[str, Any]:
    from simlab.config import flatten

    return flatten(cfg)


def _simlab_tags(cfg: RunConfig) -> dict[str, str]:
    """``simlab.<key>`` for the settings runs are searched by (:data:`simlab.names.CONFIG_TAG_KEYS`)."""
    return {names.config_tag(k): str(v) for k, v in _simlab_flatten(cfg).items() if k in names.CONFIG_TAG_KEYS}


def _simlab_check_metric(key: str, name: str, cfg: RunConfig) -> None:
    """The objective is a metric ``train`` returns for ``cfg`` (its final evaluation's): a metric only a
    step logs (a loss, a health statistic) or a single-window one under ``eval.single_window = false``
    would fail every trial."""
    played = "" if cfg.eval.single_window else " (eval.single_window is false: the compacted evaluation only)"
    names.check_metric(key, name, names.result_metrics(single_window=cfg.eval.single_window),
                       f"a metric a trial returns, its final evaluation's{played}")


def _simlab_train(cfg: RunConfig, sink: MetricSink, store: Path) -> dict[str, float]:
    from simlab.train import train

    return dict(train(cfg, sink, store=store))


def _simlab_prepare(cfgs: list[RunConfig], store: Path, workers: int = 1) -> None:
    """The base checkpoints ``cfgs`` need and the store lacks: one per task preset, base config and (with
    ``base.seed = "run"``) seed, built side by side on up to ``workers`` processes."""
    from tqdm import tqdm

    from simlab.train.base import base_checkpoint, clone_budget
    from simlab.train.identity import base_key, base_path

    todo = {base_key(cfg): cfg for cfg in cfgs if not (cfg.base.cache and base_path(cfg, store).exists())}
    if not todo:
        return
    jobs = min(workers, len(todo))
    if jobs == 1:
        for cfg in todo.values():
            with tqdm(total=clone_budget(cfg), desc=f"base checkpoint {cfg.preset}", unit="step", delay=2) as bar:
                base_checkpoint(cfg, store, progress=bar.update)
        return
    from joblib import Parallel, delayed

    bar = tqdm(total=len(todo), desc=f"base checkpoints on {jobs} processes", unit="base")
    for _ in Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")(
        delayed(_one_base)(cfg, store) for cfg in todo.values()
    ):
        bar.update(1)
    bar.close()


def limit_threads() -> None:
    """One thread per worker process (trials and base builds run side by side)."""
    # one thread per worker: the env vars cover a torch imported later by the trainer (read at import),
    # set_num_threads one already imported; importing torch here would cost every worker seconds
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _one_base(cfg: RunConfig, store: Path) -> Path:
    """One base checkpoint in a pool process, on one thread like a trial."""
    limit_threads()
    from simlab.train.base import base_checkpoint

    return base_checkpoint(cfg, store)


SIMLAB = TrialBackend(
    build=_simlab_build,
    flatten=_simlab_flatten,
    tags=_simlab_tags,
    train=_simlab_train,
    check_metric=_simlab_check_metric,
    prepare=_simlab_prepare,
)
"""simlab's own trainer: ``simlab.config.resolve`` and ``simlab.train.train``."""
