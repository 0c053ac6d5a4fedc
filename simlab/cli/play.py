"""Commands that play and train: ``demo``, ``inspect`` (reference agents or a checkpoint on a task) and
``train`` (one run, checked before anything is written).
"""

from __future__ import annotations

import functools
import inspect as inspect_module
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from simlab.cli.app import app, fail, json_safe
from simlab.errors import BaseGateError, ConfigError, TrainingDiverged

HARNESS_OPTIONS: dict[str, tuple[str, ...]] = {
    "trigger": (), "window": (), "frac": (), "t_comp": (), "chunk_steps": (), "summary_tokens": ("-m",),
    "tail_steps": ("-k",), "max_compactions": ("-S",), "max_steps": ("-H",), "discard": (), "keep_query": (),
    "summariser": (),
}
"""The harness settings ``simlab inspect`` takes as options (with their short names): named, typed and
documented by :class:`~simlab.harness.config.HarnessConfig` itself, never declared again here."""


def _with_harness_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` one option per harness setting in :data:`HARNESS_OPTIONS`; the command receives
    the ones given as ``harness`` (a dict), unchecked: the config layer checks them by key path."""
    import typing

    from simlab.harness.config import HarnessConfig
    from simlab.rules import is_real

    types = typing.get_type_hints(HarnessConfig)  # int, float, bool or str: the rules are Annotated extras
    extra = []
    for name, short in HARNESS_OPTIONS.items():
        info = HarnessConfig.__pydantic_fields__[name]
        flag = f"--{name.replace('_', '-')}"
        decls = (f"{flag}/--no-{name.replace('_', '-')}",) if types[name] is bool else (flag, *short)
        hint: Any = float if is_real(types[name]) else types[name]  # typer reads one type; the check keeps ints
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
        typer.echo(json.dumps(json_safe(stats), indent=2))
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
    from simlab.policy.checkpoint import check_policy_file, load_checkpoint
    from simlab.policy.device import default_device
    from simlab.tasks.presets import get_preset

    p = get_preset(preset, "task")
    if not path.is_file():
        raise ConfigError.invalid("checkpoint", str(path), "choose an existing checkpoint file")
    vocab_size = p.task.replace(**task).vocab_size
    check_policy_file("checkpoint", path, vocab_size=vocab_size)  # says what a foreign file is not
    try:
        policy, meta = load_checkpoint(path, expected_vocab_size=vocab_size, device=default_device())
    except (ValueError, RuntimeError, OSError) as exc:  # weights that do not fit the config the file names
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
        list[str], typer.Option("--set", metavar="KEY=VALUE", help="Override KEY=VALUE (repeatable): train.lr=1e-3. "
                                "Every key, its default and what it allows: docs/settings.md.")
    ] = [],  # noqa: B006
    out: Annotated[Optional[Path], typer.Option(help="Run folder (default: <store>/runs/<time>-<recipe>).")] = None,  # noqa: UP045
    store: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(help="Local store: base checkpoints and run folders (default: <home>/mlruns, home = "
                          "$SIMLAB_HOME or the working directory, as for sweeps)."),
    ] = None,
) -> None:
    """Train a policy: cached base checkpoint, then RL by the configured recipe; metrics as JSON lines.

    Every setting (key path, default, what it allows) is listed in docs/settings.md.
    """
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
    except BaseGateError as exc:  # refused before RL: the run folder was new or empty, and goes
        sink.close("FAILED", str(exc))
        shutil.rmtree(folder, ignore_errors=True)
        raise fail(exc) from None
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

    from simlab.config import load
    from simlab.stores import check_folder_target

    cfg = load(config, items)
    check_folder_target(store, "--store")
    folder = out or store / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{cfg.train.recipe}"
    check_folder_target(folder, "--out")
    if folder.is_dir() and any(folder.iterdir()):
        raise ConfigError.invalid("--out", str(folder), "the folder exists and is not empty (no earlier run is "
                                  "overwritten); give a new or empty folder")
    _check_device(cfg)
    return cfg, folder


def _check_device(cfg: Any) -> None:
    """Refuse ``device = "cuda"`` on a machine without one; torch is imported only to ask."""
    if cfg.device == "cuda":
        from simlab.train.base import device_of

        device_of(cfg)


SEEDS_HELP = "Run seeds: a list and ranges, e.g. 20-27 or 0,3,5-7."


def parse_seeds(text: str, option: str = "--seeds") -> list[int]:
    """``20-27`` or ``0,3,5-7`` as the seeds in order, each once; a ConfigError naming ``option`` otherwise."""
    from simlab.rules import SEED_MAX

    spans = []
    allowed = "give seeds as integers and ranges, e.g. 20-27 or 0,3,5-7"
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not (low.isdigit() and (high.isdigit() if dash else True)) or (dash and int(high) < int(low)):
            raise ConfigError.invalid(option, text, allowed)
        spans.append((int(low), int(high or low)))
    if max(high for _, high in spans) > SEED_MAX:  # before a range is spelt out
        raise ConfigError.invalid(option, text, f"seeds are at most {SEED_MAX}")
    return list(dict.fromkeys(s for low, high in spans for s in range(low, high + 1)))


@app.command()
def base(
    config: Annotated[Optional[Path], typer.Argument(help="Run config (TOML); omitted: the defaults.")] = None,  # noqa: UP045
    set_: Annotated[
        list[str], typer.Option("--set", metavar="KEY=VALUE", help="Override KEY=VALUE (repeatable): base.steps=600.")
    ] = [],  # noqa: B006
    seeds: Annotated[str, typer.Option(help=SEEDS_HELP)] = "0",
    store: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(help="Local store of the cached base checkpoints (default: <home>/mlruns, as for train)."),
    ] = None,
    out: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        help="Also write base-quality.md/.csv/.parquet here, and base-checks.md/.csv/.parquet: every seed's "
             "cloning checks (base.check_every), where it has them.")] = None,
) -> None:
    """Check the base before the RL: each seed's base model (built or cached) on the seed's held-out set,
    beside its teacher on the same instances and its floor (the base with its summaries emptied)."""
    from simlab import stores

    store = store if store is not None else stores.local_store()
    try:
        cfgs = _check_base(config, set_, seeds, store, out)
    except ConfigError as exc:
        raise fail(exc) from None
    from tqdm import tqdm

    from simlab.analysis.report.bases import base_markdown, base_row, base_table, checks_markdown, checks_table
    from simlab.analysis.tables import write_tables
    from simlab.train.base import base_quality, clone_budget

    rows, curves = [], {}
    for cfg in tqdm(cfgs, desc="bases", unit="seed", delay=2):
        with tqdm(total=clone_budget(cfg), desc=f"seed {cfg.seed}: cloning", unit="step", delay=2, leave=False) as bar:
            metrics, steps, curves[cfg.seed] = base_quality(cfg, store, progress=bar.update)
        rows.append(base_row(cfg.seed, metrics, steps))
    table = base_table([r for r in rows if r is not None])
    markdown = base_markdown(table)
    typer.echo(markdown)
    if out is not None:
        checks = checks_table(curves)
        written = write_tables(table, markdown, out, "base-quality")
        if checks.height:
            written += write_tables(checks, checks_markdown(checks), out, "base-checks")
        for path in written:
            typer.echo(f"wrote {path}")


def _check_base(config: Path | None, items: list[str], seeds: str, store: Path, out: Path | None) -> list[Any]:
    """One resolved config per seed, every input checked before anything is built or written."""
    from simlab.analysis.tables import check_output_dir
    from simlab.config import load
    from simlab.stores import check_folder_target

    cfgs = [load(config, [*items, f"seed={seed}"]) for seed in parse_seeds(seeds)]
    check_folder_target(store, "--store")
    if out is not None:
        check_output_dir(out)
    _check_device(cfgs[0])
    return cfgs
