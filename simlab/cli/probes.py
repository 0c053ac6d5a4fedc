"""``simlab lookup``: the lookup probe (:mod:`simlab.train.lookup`), a grid of supervised probes on the
prompt-cue task's summaries, with its per-setting table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from simlab.cli.app import app, fail
from simlab.cli.play import SEEDS_HELP, parse_seeds
from simlab.errors import ConfigError

PROBE_DEFAULTS = ["task.preset=keyrecall-cue-clean", "base.teacher=cued", "base.quality=1.0"]
"""What ``simlab lookup`` probes without a config: the prompt cue without distractors, the perfect ``cued``
teacher (a CONFIG file replaces these; ``--set`` goes above either)."""

CONFIG_HELP = "Run config (TOML) naming the task and teacher; omitted: keyrecall-cue-clean, the perfect cued teacher."
OUT_HELP = ("Write lookup-runs and lookup-history (.md/.csv/.parquet) here as each probe ends; probes already there "
            "under the same budget are kept, not run again.")


def parse_list(text: str, option: str, kind: type, allowed: str, ok: Any) -> list[Any]:
    """A comma list of ``kind`` values each passing ``ok``, in order, each once; a ConfigError otherwise."""
    try:
        values = [kind(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError.invalid(option, text, allowed) from None
    if not values or not all(ok(v) for v in values):
        raise ConfigError.invalid(option, text, allowed)
    return list(dict.fromkeys(values))


@app.command()
def lookup(
    config: Annotated[Optional[Path], typer.Argument(help=CONFIG_HELP)] = None,  # noqa: UP045
    set_: Annotated[list[str], typer.Option("--set", metavar="KEY=VALUE", help="Override KEY=VALUE.")] = [],  # noqa: B006
    lr: Annotated[str, typer.Option(help="Learning rates, a comma list.")] = "3e-4,1e-3,3e-3,1e-2",
    width: Annotated[str, typer.Option(help="Model widths (d_model), a comma list.")] = "64,128",
    layers: Annotated[str, typer.Option(help="Transformer layers, a comma list.")] = "2,3",
    seeds: Annotated[str, typer.Option(help=SEEDS_HELP)] = "0-2",
    max_steps: Annotated[int, typer.Option(help="Most optimiser steps per probe.")] = 20_000,
    check_every: Annotated[int, typer.Option(help="Steps between held-out checks.")] = 250,
    target: Annotated[float, typer.Option(help="Share of summaries keeping the cued fact that is learnt.")] = 0.9,
    jobs: Annotated[int, typer.Option(help="Probes run side by side (processes, one thread each).")] = 1,
    out: Annotated[Optional[Path], typer.Option(help=OUT_HELP)] = None,  # noqa: UP045
) -> None:
    """Can the policy network learn the prompt-cue lookup? Supervised probes on the cued teacher's summaries."""
    try:
        cfg, settings, budget = _check_lookup(config, set_, lr, width, layers, seeds, max_steps, check_every,
                                              target, jobs, out)
    except ConfigError as exc:
        raise fail(exc) from None
    from tqdm import tqdm

    from simlab.train.lookup import run_grid

    runs, history = _earlier(out, budget)
    todo = [s for s in settings if _key(s.__dict__) not in {_key(r) for r in runs}]
    if len(todo) < len(settings):
        typer.echo(f"{len(settings) - len(todo)} of {len(settings)} probes already in {out}; running the rest")
    bar = tqdm(total=len(todo), desc="probes", unit="probe", dynamic_ncols=True, disable=not todo)

    def done(row: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        runs.append(row)
        history.extend(rows)
        bar.update(1)
        bar.write(f"lr {row['lr']:g}, width {row['d_model']}, {row['n_layer']} layers, seed {row['seed']}: keep "
                  f"{100 * row['keep']:.1f}% after {row['steps']} steps")
        if out is not None:
            _write(out, runs, history, target)

    run_grid(cfg, todo, budget, jobs, done)
    bar.close()
    if runs:
        typer.echo(_write(out, runs, history, target) if out is not None else _markdown(runs, target))


def _check_lookup(config: Path | None, items: list[str], lr: str, width: str, layers: str, seeds: str,
                  max_steps: int, check_every: int, target: float, jobs: int, out: Path | None) -> tuple[Any, ...]:
    """The config, the grid and the budget, every input checked before anything runs or is written."""
    from simlab.analysis.tables import check_output_dir
    from simlab.config import load
    from simlab.train.lookup import ProbeBudget, ProbeSetting, check_probe_config

    cfg = load(config, [*(PROBE_DEFAULTS if config is None else []), *items])
    check_probe_config(cfg)
    heads = cfg.policy.n_head
    lrs = parse_list(lr, "--lr", float, "give learning rates in (0, 1] as a comma list", lambda v: 0 < v <= 1)
    widths = parse_list(width, "--width", int, f"give widths as a comma list of multiples of policy.n_head={heads}",
                        lambda v: v > 0 and v % heads == 0)
    depths = parse_list(layers, "--layers", int, "give layer counts from 1 to 12 as a comma list",
                        lambda v: 0 < v <= 12)
    for option, value, ok, allowed in (("--max-steps", max_steps, max_steps >= 1, "choose at least 1"),
                                       ("--check-every", check_every, check_every >= 1, "choose at least 1"),
                                       ("--target", target, 0 < target <= 1, "choose a share in (0, 1]"),
                                       ("--jobs", jobs, jobs >= 1, "choose at least 1")):
        if not ok:
            raise ConfigError.invalid(option, value, allowed)
    if out is not None:
        check_output_dir(out)
    settings = [ProbeSetting(a, w, d, s) for a in lrs for w in widths for d in depths for s in parse_seeds(seeds)]
    return cfg, settings, ProbeBudget(max_steps=max_steps, check_every=check_every, target=target)


def _key(row: dict[str, Any]) -> tuple[float, int, int, int]:
    return float(row["lr"]), int(row["d_model"]), int(row["n_layer"]), int(row["seed"])


def _earlier(out: Path | None, budget: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The probes an earlier call wrote to ``out`` under the same budget (a resumed grid keeps them)."""
    import polars as pl

    if out is None or not (out / "lookup-runs.csv").exists():
        return [], []
    runs = pl.read_csv(out / "lookup-runs.csv")
    same = (pl.col("max_steps") == budget.max_steps) & (pl.col("target") == budget.target)
    kept = runs.filter(same).to_dicts()
    keys = {_key(r) for r in kept}
    history = [r for r in pl.read_csv(out / "lookup-history.csv").to_dicts() if _key(r) in keys]
    return kept, history


def _markdown(runs: list[dict[str, Any]], target: float) -> str:
    import polars as pl

    from simlab.analysis.report.lookup import lookup_markdown

    return lookup_markdown(pl.DataFrame(runs), target)


def _write(out: Path, runs: list[dict[str, Any]], history: list[dict[str, Any]], target: float) -> str:
    """Write both tables to ``out`` (atomically each); the per-setting Markdown."""
    import polars as pl

    from simlab.analysis.tables import write_tables

    markdown = _markdown(runs, target)
    frames = [pl.DataFrame(rows, infer_schema_length=None) for rows in (runs, history)]  # columns added later
    write_tables(frames[0], markdown, out, "lookup-runs")
    write_tables(frames[1], "The lookup probe's checks: lookup-history.csv.\n", out, "lookup-history")
    return markdown
