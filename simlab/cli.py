"""The ``simlab`` command line.

Bad input exits with code 2 and a message that names the field, the bad value and what is allowed.
"""

from __future__ import annotations

import contextlib
import functools
import inspect as inspect_module
import json
import math
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperArgument, TyperCommand, TyperOption

from simlab.errors import ConfigError, TrainingDiverged


class PlainHelpCommand(TyperCommand):
    """A command whose ``--help`` shows its flags plainly (``--json``, not ``--json <bool>``) and its
    arguments as ``SPEC`` / ``[CONFIG]`` in the usage line (typer 0.29 writes ``{spec}``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _plain_metavar(param)

    def get_help_option(self, ctx: Any) -> Any:
        """The ``--help`` flag, shown without a type like every other flag."""
        option = super().get_help_option(ctx)
        if option is not None:
            _plain_metavar(option)
        return option

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``[OPTIONS] SPEC``: a required argument bare, an optional one in brackets."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.display_name_raw + ("..." if param.nargs != 1 else "")
                pieces.append(name if param.required else f"[{name}]")
        return pieces


def _plain_metavar(param: Any) -> None:
    if isinstance(param, TyperOption) and param.is_flag and not param.count:
        param.metavar = ""  # a flag takes no value: no type column
    elif isinstance(param, TyperArgument) and param.metavar is None:
        param.metavar = (param.name or "").upper()


class _Typer(typer.Typer):
    """Every command of the app is a :class:`PlainHelpCommand`."""

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", PlainHelpCommand)
        return super().command(*args, **kwargs)


app = _Typer(
    name="simlab",
    help="Simulate compaction-aware RL: credit assignment across compaction boundaries.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """simlab: segmented rollouts, every published credit-assignment choice, sweeps and analysis."""


Alpha = Annotated[float, typer.Option("--alpha", help="Two-sided significance level (each TOST test: one-sided).")]
Power = Annotated[float, typer.Option("--power", help="Power at which detectable effects and seed counts are stated.")]


def fail(message: str | Exception) -> typer.Exit:
    """Print a bad-input message (one line) and return the exit-2 exception to raise."""
    typer.echo(f"error: {' '.join(str(message).split())}", err=True)
    return typer.Exit(code=2)


HARNESS_OPTIONS: dict[str, tuple[str, ...]] = {
    "trigger": (), "window": (), "frac": (), "t_comp": (), "chunk_steps": (), "summary_tokens": ("-m",),
    "tail_steps": ("-k",), "max_compactions": ("-S",), "max_steps": ("-H",), "discard": (), "summariser": (),
}
"""The harness settings ``simlab inspect`` takes as options (with their short names): named, typed and
documented by :class:`~simlab.harness.config.HarnessConfig` itself, never declared again here."""


def _with_harness_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` one option per harness setting in :data:`HARNESS_OPTIONS`; the command receives
    the ones given as ``harness`` (a dict), unchecked: the config layer checks them by key path."""
    import typing

    from simlab.harness.config import HarnessConfig

    types = typing.get_type_hints(HarnessConfig)  # int, float, bool or str: the rules are Annotated extras
    extra = []
    for name, short in HARNESS_OPTIONS.items():
        info = HarnessConfig.__pydantic_fields__[name]  # type: ignore[attr-defined]
        flag = f"--{name.replace('_', '-')}"
        decls = (f"{flag}/--no-{name.replace('_', '-')}",) if types[name] is bool else (flag, *short)
        hint: Any = types[name]
        annotation = hint | None  # typer reads the annotation at run time
        help_text = (info.description or "").split("\n")[0]
        extra.append(inspect_module.Parameter(name, inspect_module.Parameter.KEYWORD_ONLY, annotation=annotation,
                                              default=typer.Option(None, *decls, help=help_text)))
    signature = inspect_module.signature(command)
    params = [p for p in signature.parameters.values() if p.name != "harness"]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> None:
        harness = {k: kwargs.pop(k) for k in HARNESS_OPTIONS if kwargs.get(k) is not None}
        for k in HARNESS_OPTIONS:
            kwargs.pop(k, None)
        command(harness=harness, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=[*params, *extra])  # type: ignore[attr-defined]
    return wrapper


@app.command()
def demo() -> None:
    """Show what a compaction boundary does to credit: the seed's Blocks 1 and 2 on simlab's estimators."""
    from simlab.demo import run_demo

    run_demo()


@app.command()
def audit(
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON records instead of Markdown.")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Existing folder to write audit.md, .csv and .parquet into.")
    ] = None,
    data: Annotated[
        Path | None, typer.Option("--data", help="Published-results TOML (default: the packaged one).")
    ] = None,
) -> None:
    """Recompute the published results the seed audits: difference, SE, sigma, like-for-like, verdict."""
    from simlab.analysis.audit import audit as run_audit
    from simlab.analysis.audit import to_markdown
    from simlab.analysis.audit_data import load_published
    from simlab.analysis.tables import check_output_dir, write_tables

    try:
        if out is not None:
            check_output_dir(out)  # fail before any work, and before anything is written
        frame = run_audit(load_published(data))
        markdown = to_markdown(frame)
        if out is not None:
            write_tables(frame, markdown, out, "audit")
    except ConfigError as exc:  # AuditDataError, OutputDirError
        raise fail(str(exc)) from exc
    typer.echo(frame.write_json() if json_out else markdown)
def _json_safe(value: Any) -> Any:
    """NaN and infinities as null, at any depth: JSON has neither, and a reader must not have to know
    Python's spelling."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@app.command()
@_with_harness_options
def inspect(
    task: str = typer.Option(..., "--task", help="Task preset name (see tasks/presets.py)."),
    agent: str = typer.Option("scripted", help="Reference agent: oracle, scripted or random."),
    episodes: int = typer.Option(512, help="Rollouts to run."),
    batch: int = typer.Option(256, help="Environments per batch."),
    quality: Optional[float] = typer.Option(None, help="Scripted agent's summary quality q, in [0, 1]."),  # noqa: UP045
    seed: int = typer.Option(0, help="Seed of the first instance."),
    group_size: int = typer.Option(
        8, "--group-size", "-G", help="Rollouts per prompt (GRPO's G): the within-group statistics' groups."
    ),
    set_: list[str] = typer.Option(  # noqa: B008
        [], "--set", metavar="KEY=VALUE",
        help="Override KEY=VALUE (repeatable): a task field (noise=0.1, task.noise=0.1) or harness.KEY."
    ),
    vs_sliding: bool = typer.Option(
        False, "--vs-sliding", help="Also run the same agent under `sliding` (no summary) and report the gap."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a report."),
    checkpoint: Optional[Path] = typer.Option(  # noqa: UP045, B008
        None, "--checkpoint", help="Play a trained policy checkpoint (sampling at temperature 1, writing its "
        "own summaries) instead of --agent, under the harness it was trained with."
    ),
    *,
    harness: dict[str, Any],
) -> None:
    """Run a task preset under a reference agent and a harness setting; print calibration statistics."""
    from tqdm import tqdm

    from simlab.harness.stats import inspect_preset

    factory = None
    try:
        task_overrides, harness = _inspect_overrides(set_, harness)
        if checkpoint is not None:
            factory, task_overrides, harness = _checkpoint_agent(checkpoint, task, task_overrides, harness, seed)
            agent = "checkpoint"
    except ConfigError as exc:
        raise fail(exc) from None
    runs = 2 if vs_sliding else 1
    bar = tqdm(total=runs * episodes, desc=f"{task} / {agent}", disable=as_json or episodes < 1024, leave=False)
    common: dict[str, Any] = dict(
        episodes=episodes, batch=batch, seed=seed, quality=quality, group_size=group_size, task=task_overrides,
        progress=bar.update, agent_factory=factory,
    )
    try:
        stats = inspect_preset(task, agent, harness=harness, **common)
        if vs_sliding:
            base = inspect_preset(task, agent, harness={**harness, "trigger": "sliding"}, **common)
            stats["sliding_success_rate"] = base["success_rate"]
            stats["summary_gap"] = stats["success_rate"] - base["success_rate"]
    except ConfigError as exc:  # a bad task, harness or agent setting
        raise fail(exc) from None
    finally:
        bar.close()
    if as_json:
        typer.echo(json.dumps(_json_safe(stats), indent=2))
        return
    who = f"checkpoint={checkpoint}" if checkpoint is not None else (
        f"agent={agent}" + (f" q={stats['quality']}" if agent == "scripted" else ""))
    _print_inspection(stats, f"{task} | {who} | trigger={stats['trigger']}")


def _print_inspection(stats: dict[str, Any], title: str) -> None:
    """``inspect``'s human-readable report, with the gap to a no-summary run when it was measured."""
    from simlab.harness.stats import format_stats

    typer.echo(format_stats(stats, title))
    if "summary_gap" in stats:
        typer.echo(f"  vs sliding       {stats['sliding_success_rate']:.3f} without a summary; "
                   f"the summary is worth {stats['summary_gap']:+.3f}")


def _checkpoint_agent(
    path: Path, preset: str, task: dict[str, Any], harness: dict[str, Any], seed: int
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The agent factory of ``inspect --checkpoint``, and the task and harness settings to play it under.

    The checkpoint's own harness (and, for its own preset, its task) come first, then the command's
    options: by default a trained policy is calibrated where it was trained. Bad input raises ConfigError.
    """
    import torch

    from simlab.config import POLICY_MARGIN
    from simlab.policy.agent import PolicyAgent
    from simlab.policy.checkpoint import load_checkpoint
    from simlab.policy.device import default_device
    from simlab.tasks.presets import get_preset

    p = get_preset(preset, "task")
    if not path.is_file():
        raise ConfigError.invalid("checkpoint", str(path), "choose an existing checkpoint file")
    try:
        policy, meta = load_checkpoint(path, expected_vocab_size=p.task.replace(**task).vocab_size,
                                       device=default_device())
    except (ValueError, RuntimeError, OSError) as exc:
        raise ConfigError.invalid("checkpoint", str(path), f"it does not load as a policy checkpoint of this "
                                  f"task ({' '.join(str(exc).split())})") from None
    own_task = meta.get("task", {}) if meta.get("preset") == preset else {}
    task = {**{k: tuple(v) if isinstance(v, list) else v for k, v in own_task.items()}, **task}
    harness = {**meta.get("harness", {}), **harness}
    window = harness.get("window", p.harness.get("window", 0))
    if window + POLICY_MARGIN > policy.config.max_len:
        raise ConfigError.invalid("harness.window", window, f"the checkpoint's policy holds {policy.config.max_len} "
                                  f"tokens; choose an integer <= {policy.config.max_len - POLICY_MARGIN}")
    if harness.get("summariser") == "frozen":
        raise ConfigError.invalid("harness.summariser", "frozen", "inspect plays the checkpoint alone; choose "
                                  "'self' or a reference agent's name (--summariser)")
    policy.eval()

    def make(env: Any, first: int) -> PolicyAgent:
        gen = torch.Generator(device=policy.device).manual_seed(seed * 1_000_003 + first)
        return PolicyAgent(policy, int(env.num_envs), generator=gen)

    return make, task, harness


def _inspect_overrides(items: list[str], harness: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--set`` items of ``inspect`` (the run config's grammar): a bare key or ``task.KEY`` is a task field,
    ``harness.KEY`` a harness setting (which wins over the option of the same name)."""
    from simlab.schema import parse_overrides

    task: dict[str, Any] = {}
    harness = dict(harness)
    for key, value in parse_overrides(items).items():
        section, _, name = key.rpartition(".")
        if section in ("", "task"):
            task[name] = value
        elif section == "harness":
            harness[name] = value
        else:
            raise ConfigError(f"`--set {key}=...` is invalid; use a task field (noise, task.noise) or harness.KEY",
                              key="--set", value=key, allowed="use task.KEY or harness.KEY")
    return task, harness


@app.command()
def train(
    config: Annotated[Optional[Path], typer.Argument(help="Run config (TOML); omitted: the defaults.")] = None,  # noqa: UP045
    set_: Annotated[
        list[str], typer.Option("--set", metavar="KEY=VALUE", help="Override KEY=VALUE (repeatable): train.lr=1e-3.")
    ] = [],  # noqa: B006
    out: Annotated[Optional[Path], typer.Option(help="Run folder (default: <store>/runs/<time>-<recipe>).")] = None,  # noqa: UP045
    store: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(help="Local store: base checkpoints and run folders (default: <home>/mlruns, home = "
                          "$SIMLAB_HOME or the working directory, as for sweeps)."),
    ] = None,
) -> None:
    """Train a policy: cached base checkpoint, then RL by the configured recipe; metrics as JSON lines."""
    from simlab import stores

    store = store if store is not None else stores.local_store()
    try:
        cfg, folder = _check_train(config, set_, out, store)
    except ConfigError as exc:
        raise fail(exc) from None
    from simlab.sinks import JsonlSink  # torch comes with these: bad input is refused without it
    from simlab.train import train as run_training

    sink = JsonlSink(folder)  # the first write: every input was checked above
    typer.echo(f"run folder: {folder}")
    try:
        final = run_training(cfg, sink, store=store, progress=True, out_dir=folder)
    except TrainingDiverged as exc:
        sink.close("FAILED", str(exc))
        typer.echo(f"error: training diverged: {exc}", err=True)
        raise typer.Exit(code=1) from None
    sink.close("FINISHED")
    for key in sorted(final):
        typer.echo(f"{key:<40} {final[key]:.4f}")


def _check_train(config: Path | None, items: list[str], out: Path | None, store: Path) -> tuple[Any, Path]:
    """The resolved config and the run folder, every input checked before anything is written."""
    import time

    from simlab.config import apply_overrides, load, parse_overrides, resolve
    from simlab.stores import check_folder_target

    cfg = load(config, items) if config is not None else resolve(apply_overrides({}, parse_overrides(items)))
    check_folder_target(store, "--store")
    folder = out or store / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{cfg.train.recipe}"
    check_folder_target(folder, "--out")
    if folder.is_dir() and any(folder.iterdir()):
        raise ConfigError.invalid("--out", str(folder), "the folder exists and is not empty (no earlier run is "
                                  "overwritten); give a new or empty folder")
    if cfg.device == "cuda":  # on a machine without one; torch is imported only to ask
        from simlab.train.base import device_of

        device_of(cfg)
    return cfg, folder


SpecArg = Annotated[
    str, typer.Argument(help="Sweep spec: a TOML file, or the name of a shipped spec (quick, recipes, ...).")
]
StorageOpt = Annotated[
    str | None,
    typer.Option("--storage", help="Optuna storage: a journal file path (one host) or a database URL, "
                                   "postgresql://... for several hosts (default: mlruns/optuna-journal.log)."),
]
TrackingOpt = Annotated[
    str | None,
    typer.Option("--tracking-uri", help="MLflow tracking URI: http://HOST:PORT for a server (default: "
                                        "$MLFLOW_TRACKING_URI, else sqlite:///<home>/mlruns/mlflow.db)."),
]
TrialOpt = Annotated[str, typer.Option("--trial", hidden=True, help="Trial backend as module:attribute.")]
HeartbeatOpt = Annotated[
    int, typer.Option("--heartbeat", help="Seconds between heartbeats of a database study; a trial without "
                                          "one for 3 intervals is failed and its cell run again.")
]


def _open_spec(spec: str, storage: str | None, tracking_uri: str | None) -> Any:
    """The spec, with both stores checked before the heavy imports (a bad store exits 2 within seconds)."""
    from simlab import stores
    from simlab.sweep import load_spec
    from simlab.sweep.shipped import locate

    parsed = load_spec(locate(spec))
    stores.preflight(storage, tracking_uri, stores.home())
    return parsed


@app.command()
def sweep(
    spec: SpecArg,
    workers: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option("--workers", help="Worker processes, 1 torch thread each (default: the machine's cores)."),
    ] = None,
    storage: StorageOpt = None,
    tracking_uri: TrackingOpt = None,
    trial: TrialOpt = "simlab.sweep.backend:SIMLAB",
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show the progress bar.")] = True,
    heartbeat: HeartbeatOpt = 10,
) -> None:
    """Run (or resume) a sweep: every missing grid cell x seed, trials in worker processes, runs in MLflow."""
    try:
        parsed = _open_spec(spec, storage, tracking_uri)
        from simlab.sweep.runner import run_sweep

        result = run_sweep(parsed, workers=workers, storage=storage, tracking_uri=tracking_uri, backend=trial,
                           progress=progress, echo=typer.echo, heartbeat=heartbeat)
    except ConfigError as exc:  # a bad spec, store or trial backend: nothing was written
        raise fail(exc) from exc
    typer.echo(f"done: {result.ran} trial(s) run, {result.failed} failed, in {result.wall_s:.1f} s "
               f"on {result.workers} worker(s)")
    table = _write_summary(parsed, result)
    if table is not None:
        typer.echo(f"results table: {table} (and {table.with_suffix('.md')})")
    _print_report(parsed.name, result.tracking_uri)
    ui_hint = f" --tracking-uri {tracking_uri}" if tracking_uri else ""
    typer.echo(f"browse the runs with: {command_name()} ui{ui_hint}")


@app.command()
def worker(
    spec: SpecArg,
    storage: StorageOpt = None,
    tracking_uri: TrackingOpt = None,
    trial: TrialOpt = "simlab.sweep.backend:SIMLAB",
    heartbeat: HeartbeatOpt = 10,
) -> None:
    """Join a sweep from any machine (creating it if new) and run its trials until every cell is finished."""
    try:
        parsed = _open_spec(spec, storage, tracking_uri)
        from simlab.sweep.worker import run_worker

        result = run_worker(parsed, storage=storage, tracking_uri=tracking_uri, backend=trial,
                            heartbeat=heartbeat, echo=typer.echo)
    except ConfigError as exc:  # a bad spec, store or trial backend: nothing was written
        raise fail(exc) from exc
    _write_summary(parsed, result)
    typer.echo(f"done: the grid is finished; this worker ran {result.ran} trial(s) in {result.wall_s:.1f} s")
    hint = f" --tracking-uri {tracking_uri}" if tracking_uri else ""
    typer.echo(f"report: {command_name()} report {parsed.name}{hint}")


def command_name() -> str:
    """How to run simlab again from the user's shell: ``simlab`` when that name on the PATH is this
    install, else the path of this install's script (``.venv/bin/simlab`` when it lies under the working
    folder): a fresh setup never activates its venv, so a bare ``simlab`` in a hint would not be found."""
    import os
    import shutil

    script = Path(sys.argv[0])
    if script.name != "simlab" or not script.is_file():  # python -m simlab.cli, or a test runner
        script = Path(sys.executable).parent / "simlab"
    if not script.is_file():
        return "simlab"
    found = shutil.which("simlab")
    if found is not None and Path(found).resolve() == script.resolve():
        return "simlab"
    where = script.absolute()
    cwd = Path.cwd()
    return os.path.relpath(where, cwd) if where.is_relative_to(cwd) else str(where)


def _write_summary(spec: Any, result: Any) -> Path | None:
    """``summary.csv``/``.md`` beside the runner's ``trials.csv``, attached to the parent run; a failure
    to write them is said, never raised (the trials are done and stored)."""
    from simlab import tracking
    from simlab.analysis.summary import write_summary

    if result.table is None:
        return None
    try:
        path = write_summary(result.table, sweep=spec.name, metric=spec.objective.metric,
                             direction=spec.objective.direction)
        store = tracking.Store(result.tracking_uri, None)
        tracking.log_artifacts(store, result.parent_run_id, [path, path.with_suffix(".md")], "summary")
    except (OSError, ValueError, ConfigError) as exc:
        typer.echo(f"summary not written: {type(exc).__name__}: {exc}", err=True)
        return None
    return path


def _print_report(experiment: str, tracking_uri: str) -> None:
    """The report at the end of a sweep; a sweep with nothing to report says why instead of failing."""
    from simlab.analysis.report import build_report
    from simlab.errors import ReportError

    try:
        made = build_report(experiment, tracking_uri=tracking_uri)
    except ReportError as exc:
        typer.echo(f"no report: {exc}")
        return
    except (ConfigError, ValueError, OSError) as exc:  # the trials are stored: a report failure must not hide that
        typer.echo(f"report failed: {type(exc).__name__}: {exc}; rerun it with `{command_name()} report {experiment}`")
        return
    typer.echo(made.markdown)
    typer.echo(f"report files: {made.files[0].parent} (also artifacts of the parent run {made.logged_to})")
    _summary_on_parent(made, tracking_uri)


@app.command()
def report(
    experiment: Annotated[str, typer.Argument(help="Sweep name (its experiment) or any experiment name or id.")],
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Variant to difference against (default: the spec's baseline, "
                                        "else the first grid cell)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Existing folder for report.md/.csv/.parquet and the figures "
                                   "(default: mlruns/sweeps/<name>/report)."),
    ] = None,
    against_published: Annotated[
        bool, typer.Option("--against-published", help="Add the published ablation deltas for the same choices.")
    ] = False,
    effect: Annotated[
        float, typer.Option("--effect", help="Equivalence margin and effect size in points: a tie is decided by "
                                             "a TOST within +-EFFECT, and undecided rows give the seeds it needs.")
    ] = 5.0,
    alpha: Alpha = 0.05,
    power: Power = 0.8,
    threshold: Annotated[
        float | None,
        typer.Option("--threshold", help="Compacted success (points) whose first RL step the speed table gives."),
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, "
                                            "else sqlite:///<home>/mlruns/mlflow.db)."),
    ] = None,
) -> None:
    """Every variant's mean and SE over seeds and instances, its difference from a baseline, power, figures."""
    try:
        if out is not None:
            from simlab.analysis.tables import check_output_dir

            check_output_dir(out)  # the options first, as `simlab audit`
        _check_experiment(experiment, tracking_uri)  # before MLflow and the report's own imports (seconds)
        levels = report_levels(effect, alpha, power, threshold)
        from simlab.analysis.report import build_report

        made = build_report(
            experiment, baseline=baseline, out=out, against=against_published, tracking_uri=tracking_uri,
            levels=levels, threshold=threshold,
        )
    except ConfigError as exc:  # ReportError, OutputDirError, a malformed --tracking-uri, a bad level
        raise fail(str(exc)) from exc
    typer.echo(made.markdown)
    if baseline is None:  # the parent's summary is the sweep's own report, against its own baseline
        _summary_on_parent(made, tracking_uri)
    for why in made.skipped:
        typer.echo(f"figure skipped: {why}", err=True)
    where = f"; logged to parent run {made.logged_to}" if made.logged_to else ""
    typer.echo(f"written: {made.files[0].parent}{where}", err=True)


def summary_rows(table: Any) -> list[dict[str, Any]]:
    """The per-variant numbers the sweep's parent run logs, from the report's variant table
    (:func:`simlab.analysis.report.variant_table`; only these of its columns: evaluation, statistic, variant,
    baseline, mean, se, difference, se_difference, sigma). The baseline has no difference from itself; a
    statistic other than the final value is named after its evaluation (``compacted_auc``)."""
    rows = []
    for r in table.to_dicts():
        stats = {"mean": r.get("mean"), "se": r.get("se")}
        if r.get("variant") != r.get("baseline"):
            stats |= {"diff": r.get("difference"), "diff_se": r.get("se_difference"), "sigma": r.get("sigma")}
        statistic = r.get("statistic")
        evaluation = r.get("evaluation") if statistic in (None, "final") else f"{r.get('evaluation')}_{statistic}"
        rows.append({"evaluation": evaluation, "variant": r.get("variant"), "stats": stats})
    return rows


def _summary_on_parent(made: Any, tracking_uri: str | None) -> None:
    """Log the report's per-variant summary on the sweep's parent run and refresh the sweep's UI views, so
    that the parent row alone shows the result; a failure is said, never raised (the report is written)."""
    from simlab import tracking
    from simlab.tracking.views import log_summary, write_views

    if made.logged_to is None:
        return
    try:
        store = tracking.resolve_store(tracking_uri)
        log_summary(store, made.logged_to, summary_rows(made.table))
        write_views(store.client(), made.sweep.experiment_id)
    except Exception as exc:  # the store is MLflow's: its errors are not simlab's to list
        typer.echo(f"summary not logged on the parent run: {type(exc).__name__}: {exc}", err=True)


def _check_experiment(experiment: str, tracking_uri: str | None) -> None:
    """Raise :class:`~simlab.errors.ReportError` when a local store (sqlite) has no active experiment of
    that name or id, naming the ones it has. Reads the file directly: importing MLflow takes seconds.
    Any other store, or a file this cannot read, is left to the report's own check."""
    import sqlite3

    from simlab import stores
    from simlab.errors import ReportError

    uri, _ = stores.check_run_store(tracking_uri, stores.home())
    db = stores.sqlite_path(uri)
    if db is None:
        return
    if not db.is_file():  # reading must not create an empty store
        raise ReportError(f"experiment {experiment!r} does not exist in {uri} (no such file); run `simlab sweep` "
                          "first", key="experiment", value=experiment, allowed="run `simlab sweep` first")
    try:
        with contextlib.closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=5)) as conn:
            rows = conn.execute("SELECT experiment_id, name FROM experiments WHERE lifecycle_stage = 'active' "
                                "ORDER BY experiment_id").fetchall()
    except sqlite3.Error:
        return
    if any(experiment in (str(eid), name) for eid, name in rows):
        return
    have = ", ".join(repr(name) for _, name in rows) or "none"
    raise ReportError(f"experiment {experiment!r} does not exist in {uri}; choose one of its experiments ({have}) "
                      "or run `simlab sweep` first", key="experiment", value=experiment, allowed=have)


def report_levels(effect: float, alpha: float, power: float, threshold: float | None = None) -> Any:
    """The report's :class:`~simlab.analysis.report.Levels`, each flag checked (one line naming it)."""
    from simlab.analysis.power import check_levels
    from simlab.analysis.report import Levels

    if not (math.isfinite(effect) and effect > 0):
        raise ConfigError.invalid("--effect", effect, "choose an effect size > 0 points")
    if threshold is not None and not (math.isfinite(threshold) and 0 <= threshold <= 100):
        raise ConfigError.invalid("--threshold", threshold, "choose a success level in [0, 100] points")
    check_levels(alpha, power)
    return Levels(effect=effect, alpha=alpha, power=power)


@app.command()
def findings(
    json_out: Annotated[bool, typer.Option("--json", help="Print the rows as JSON records.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the full Markdown table (mechanisms, what seeds varied).")
    ] = False,
    export: Annotated[
        bool, typer.Option("--export", help="Write each finished sweep's per-run table, histories and per-episode "
                                            "outcomes to analysis/findings/.")
    ] = False,
    source: Annotated[
        str, typer.Option("--source", help="Where runs come from: auto (the store, else the exports), store, exports.")
    ] = "auto",
    specs: Annotated[
        Path | None, typer.Option("--specs", help="Folder of findings specs (default: sweeps/findings).")
    ] = None,
    alpha: Alpha = 0.05,
    power: Power = 0.8,
    figures: Annotated[
        Path | None, typer.Option("--figures", help="Existing folder for one dose-response figure per campaign.")
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, "
                                            "else sqlite:///<repo>/mlruns/mlflow.db)."),
    ] = None,
) -> None:
    """Each published finding beside simlab's difference, its control and a verdict (a compact table)."""
    from simlab.analysis import findings as fd
    from simlab.analysis import findings_text
    from simlab.analysis.power import check_levels
    from simlab.analysis.tables import check_output_dir

    try:
        if source not in ("auto", "store", "exports"):
            raise ConfigError.invalid("--source", source, "choose one of 'auto', 'store', 'exports'")
        if specs is not None and not specs.is_dir():
            raise ConfigError.invalid("--specs", str(specs), "choose an existing folder of findings specs")
        check_levels(alpha, power)
        if figures is not None:
            check_output_dir(figures)
        if source != "exports":
            from simlab import stores

            stores.check_run_store(tracking_uri, stores.home())
        rows = fd.load_rows(specs or fd.SPEC_DIR)
        if export:
            for path in fd.export(rows, tracking_uri=tracking_uri):
                typer.echo(f"exported {path}", err=True)
        found = fd.gather(rows, tracking_uri=tracking_uri, source=source,  # type: ignore[arg-type]
                          levels=fd.Levels(alpha, power))
    except ConfigError as exc:  # FindingsError, a malformed --tracking-uri, a bad level
        raise fail(str(exc)) from exc
    for path in fd.dose_figures(found, figures) if figures is not None else []:
        typer.echo(f"figure {path}", err=True)
    if json_out:
        typer.echo(json.dumps(_json_safe(found.rows), indent=2))
    else:
        typer.echo(findings_text.to_markdown(found) if markdown else findings_text.to_compact(found))


@app.command()
def ui(
    host: Annotated[str, typer.Option("--host", help="Interface to bind (only this one).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to serve on.")] = 5000,
    tracking_uri: Annotated[
        str | None, typer.Option("--tracking-uri", help="Store to show (default: the local mlruns/ store).")
    ] = None,
    workers: Annotated[int, typer.Option("--workers", help="Server worker processes.")] = 1,
) -> None:
    """Start the MLflow UI on the local store, bound to 127.0.0.1 unless --host says otherwise."""
    import os

    from simlab import stores, tracking
    from simlab.schema import IntIn, check_value
    from simlab.tracking.server import check_listen, ui_command
    from simlab.tracking.views import sweep_links

    try:
        check_value("--port", port, IntIn(1, 65535))
        check_value("--workers", workers, IntIn(1, 64))
        store = tracking.Store(*stores.check_run_store(tracking_uri, stores.home()))  # checked as sweep does
        check_listen(host, port)  # the name resolves, the address is this machine's, the port is free
    except ConfigError as exc:
        raise fail(exc) from exc
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"warning: the MLflow UI has no authentication and will listen on {host}", err=True)
    tracking.prepare(store)
    cmd = ui_command(store, host, port, workers)
    # the server's job runner (GenAI judges, scheduled scorers) starts ~8 processes simlab never uses
    os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    typer.echo(f"MLflow UI for {store.tracking_uri} at {url}  (Ctrl-C stops it)")
    for links in sweep_links(store, url):
        typer.echo(f"  sweep {links.name}:\n    trials   {links.trials}\n    charts   {links.charts}\n"
                   f"    summary  {links.summary}")
    os.execv(cmd[0], cmd)  # hand the terminal and signals to the server


BUG_EXIT = 1
"""Exit code of an internal error (a bug), as against 2 for bad input."""


def main() -> None:
    """The ``simlab`` console script: bad input (a :class:`ConfigError`) is one line and exit 2; any other
    exception is simlab's fault, not the user's, and says so under its traceback, with exit 1."""
    try:
        app()
    except ConfigError as exc:  # bad input that escaped a command's own handling
        typer.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    except Exception:
        traceback.print_exc()
        typer.echo("error: an internal error in simlab (a bug, not your input); the traceback above says where",
                   err=True)
        sys.exit(BUG_EXIT)


if __name__ == "__main__":
    main()
