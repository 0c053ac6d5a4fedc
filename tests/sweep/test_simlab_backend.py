"""Sweeps on simlab's own trainer: key paths checked by ``simlab.config``, one tiny real trial end to end."""

from __future__ import annotations

import tomllib
from pathlib import Path

import optuna

from simlab import tracking
from simlab.sweep import parse_spec
from simlab.sweep.queue import trial_queue
from tests.stores import TINY, Stores, run_cli, write_spec


def _args(stores: Stores) -> list[str]:
    return ["--tracking-uri", stores.tracking_uri, "--storage", str(stores.storage)]


def test_unknown_key_path_is_named_by_the_run_config(stores: Stores, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "seeds = [0]\n[space]\ntrain.lrr = [0.1]\n" + TINY)
    result = run_cli(["sweep", str(spec), *_args(stores)])
    assert result.exit_code == 2, result.output
    assert "`train.lrr` is not a setting" in result.output
    assert stores.written() == []


def test_out_of_range_value_is_named(stores: Stores, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "seeds = [0]\n[space]\ntrain.eps_low = [0.2, 0]\n" + TINY)
    result = run_cli(["sweep", str(spec), *_args(stores)])
    assert result.exit_code == 2, result.output
    assert "`train.eps_low=0` is invalid" in result.output
    assert stores.written() == []


def test_tiny_real_sweep_end_to_end(ready_stores: Stores, tmp_path: Path) -> None:
    spec = parse_spec(
        tomllib.loads('name = "tiny"\nseeds = [0]\n[space]\ntrain.normaliser = ["token"]\n' + TINY)
    )
    result = ready_stores.sweep(spec, root=tmp_path)
    assert [o.state for o in result.outcomes] == ["COMPLETE"], result.outcomes
    assert list((tmp_path / "mlruns" / "base").glob("*.pt")), "the base checkpoint was not cached"
    study = optuna.load_study(study_name="tiny", storage=trial_queue(str(ready_stores.storage)).open())
    (trial,) = study.get_trials()
    client = tracking.resolve_store(ready_stores.tracking_uri).client()
    run = client.get_run(trial.user_attrs["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    assert (
        run.data.params["train.normaliser"] == "token" and run.data.params["task.preset"] == "keyrecall-tiny"
    )
    assert run.data.tags["simlab.train.recipe"] == "supo" and run.data.tags["simlab.harness.v_sum"] == "v1"
    assert trial.value == run.data.metrics["eval/compacted/success"]
    assert "eval/single_window/success" in run.data.metrics
    assert [m.step for m in client.get_metric_history(run.info.run_id, "eval/compacted/compaction_rate")] == [
        0,
        1,
        2,
    ]


def _refused_objective(stores: Stores, tmp_path: Path, metric: str, extra: str = "") -> str:
    """The one line ``simlab sweep`` exits 2 with for ``metric`` as the objective, nothing written."""
    spec = write_spec(tmp_path, "seeds = [0]\n[space]\ntrain.lr = [0.001]\n"
                      + TINY.replace("eval.episodes = 8", f"eval.episodes = 8\n{extra}")
                      .replace('"eval/compacted/success"', f'"{metric}"'))
    result = run_cli(["sweep", str(spec), *_args(stores)])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and f"`objective.metric={metric!r}` is invalid" in line, line
    assert stores.written() == [] and not (tmp_path / "mlruns").exists()
    return line


def test_misspelt_objective_metric_exits_2_before_the_first_trial(stores: Stores, tmp_path: Path) -> None:
    """Issue 30: a metric no run logs used to run every trial, fail each, and exit 0."""
    line = _refused_objective(stores, tmp_path, "eval/compacted/sucess")
    assert "did you mean 'eval/compacted/success'" in line and "choose a metric a trial returns" in line, line


def test_a_metric_only_a_step_logs_is_not_an_objective(stores: Stores, tmp_path: Path) -> None:
    """A trial's value is read from what the run returns (its final evaluation): a loss or a health
    statistic is logged every step but never returned, so every trial would fail."""
    for metric in ("loss/loss", "health/within_group/corr", "train/success"):
        assert "choose a metric a trial returns, its final evaluation's" in _refused_objective(stores, tmp_path, metric)


def test_a_single_window_objective_needs_the_single_window_evaluation(stores: Stores, tmp_path: Path) -> None:
    line = _refused_objective(stores, tmp_path, "eval/single_window/success", "eval.single_window = false")
    assert "eval.single_window is false: the compacted evaluation only" in line, line


def test_every_objective_a_shipped_spec_names_is_one_a_trial_returns() -> None:
    """The shipped specs' objectives (success rates, cost per episode) are in what the trainer returns."""
    from simlab import names
    from simlab.sweep import load_spec

    root = Path(__file__).resolve().parents[2] / "sweeps"
    metrics = {load_spec(path).objective.metric for path in sorted(root.rglob("*.toml"))}
    assert "eval/compacted/success" in metrics
    assert metrics <= set(names.result_metrics()), metrics - set(names.result_metrics())
    assert set(names.result_metrics(single_window=False)) < set(names.result_metrics())
    assert all(names.declared(m) for m in names.result_metrics())


def test_a_seed_whose_base_misses_the_gate_is_reported_and_leaves_no_run(ready_stores: Stores, tmp_path: Path) -> None:
    gate = "base.check_every = 1\nbase.check_episodes = 4\nbase.min_gain = 100\n"  # 100 points: out of reach
    spec = parse_spec(tomllib.loads('name = "gated"\nseeds = [0]\n[space]\ntrain.normaliser = ["token"]\n'
                                   + TINY.replace("[base]\n", "[base]\n" + gate)))
    result = ready_stores.sweep(spec, root=tmp_path)
    (outcome,) = result.outcomes
    assert outcome.state == "FAIL" and "base model of seed 0 missed the gate" in outcome.reason, outcome
    study = optuna.load_study(study_name="gated", storage=trial_queue(str(ready_stores.storage)).open())
    (trial,) = study.get_trials()
    assert trial.user_attrs["failure"] == "base_gate"
    client = tracking.resolve_store(ready_stores.tracking_uri).client()
    assert client.get_run(trial.user_attrs["mlflow_run_id"]).info.lifecycle_stage == "deleted"
