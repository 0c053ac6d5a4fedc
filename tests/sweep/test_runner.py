"""The runner on real stores: enqueue exactly once, diverged trials recorded, runs nested, resume no-op."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import optuna
from optuna.trial import TrialState

from simlab import tracking
from simlab.sweep import lifecycle, parse_spec
from simlab.sweep.plan import GridPlan
from simlab.sweep.queue import trial_queue
from simlab.sweep.study import FINAL_FAILURES
from tests.stores import TOY, Stores, run_cli, write_spec

SPEC = """
name = "toy"
seeds = [0, 1]
[base]
train.steps = 6
[space]
train.lr = [0.1, 5.0]          # 5.0 diverges: the step size is above 2 / curvature
train.overlong_mask = [true, false]
[objective]
metric = "eval/compacted_success"
"""


def test_enqueue_each_cell_exactly_once(tmp_path: Path) -> None:
    spec = parse_spec(tomllib.loads(SPEC))
    storage = trial_queue(str(tmp_path / "journal.log")).open()
    study = optuna.create_study(study_name=spec.name, storage=storage)
    assert GridPlan().enqueue(study, spec, FINAL_FAILURES) == 8
    assert GridPlan().enqueue(study, spec, FINAL_FAILURES) == 0  # a second coordinator (or a rerun) adds nothing
    cells = [t.user_attrs["cell"] for t in study.get_trials()]
    assert sorted(cells) == sorted(c.key for c in spec.cells())
    # a cell whose trial failed for a reason other than divergence is queued again, once
    first = lifecycle.claim_waiting(study)
    assert first is not None
    assert lifecycle.fail(study, first, lifecycle.KILLED, "killed: its process died")
    assert GridPlan().enqueue(study, spec, FINAL_FAILURES) == 1
    assert GridPlan().enqueue(study, spec, FINAL_FAILURES) == 0


def test_sweep_records_diverged_trials_and_continues(ready_stores: Stores, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SPEC)
    result = run_cli(["sweep", str(spec), "--workers", "1", "--no-progress", *ready_stores.args()])
    assert result.exit_code == 0, result.output
    assert "results table:" in result.output
    # the report follows; the toy backend logs no eval/compacted/success, so every seed counts as missing
    assert "## simlab report: toy" in result.output and "4 of 8 trial runs finished" in result.output

    study = optuna.load_study(study_name="toy", storage=trial_queue(str(ready_stores.storage)).open())
    by_state: dict[TrialState, list[optuna.trial.FrozenTrial]] = {}
    for t in study.get_trials():
        by_state.setdefault(t.state, []).append(t)
    assert len(by_state[TrialState.COMPLETE]) == 4
    assert len(by_state[TrialState.FAIL]) == 4
    for t in by_state[TrialState.FAIL]:
        assert t.params["train.lr"] == 5.0
        assert t.user_attrs["failure"] == "diverged"
        assert "TrainingDiverged" in t.user_attrs["reason"]

    client = tracking.resolve_store(ready_stores.tracking_uri).client()
    experiment = client.get_experiment_by_name("toy")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get(tracking.ROLE_TAG) == "parent"]
    children = [r for r in runs if r.data.tags.get(tracking.ROLE_TAG) == "trial"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == 8
    assert {r.data.tags[tracking.PARENT_TAG] for r in children} == {parents[0].info.run_id}
    failed = [r for r in children if r.info.status == "FAILED"]
    assert len(failed) == 4
    assert all("TrainingDiverged" in r.data.tags[tracking.REASON_TAG] for r in failed)
    done = next(r for r in children if r.info.status == "FINISHED")
    assert done.data.params["train.lr"] == "0.1" and "train.seed" in done.data.params
    assert done.data.tags["simlab.estimator"] == "rollout_group" and "simlab.git_commit" in done.data.tags
    history = client.get_metric_history(done.info.run_id, "compaction_rate")
    assert [m.step for m in history] == list(range(6))
    artifacts = {a.path for a in client.list_artifacts(done.info.run_id, "figures")}
    assert "figures/learning_curve.png" in artifacts

    summary = (Path(ready_stores.folder) / "sweeps" / "toy" / "summary.csv").read_text()
    assert "lr=0.1" in summary and "lr=5.0" in summary

    # rerunning the same command runs nothing: completed and diverged cells are results
    again = run_cli(["sweep", str(spec), "--no-progress", *ready_stores.args()])
    assert again.exit_code == 0, again.output
    assert "0 of 8 trial(s) to run" in again.output
    assert len(study.get_trials()) == 8


def test_changed_spec_under_the_same_name_is_refused(ready_stores: Stores, tmp_path: Path) -> None:
    small = SPEC.replace("train.lr = [0.1, 5.0]", "train.lr = [0.1]").replace("[true, false]", "[true]")
    spec = write_spec(tmp_path, small.replace("seeds = [0, 1]", "seeds = [0]"))
    assert run_cli(["sweep", str(spec), "--no-progress", *ready_stores.args()]).exit_code == 0
    changed = write_spec(tmp_path, small.replace("train.steps = 6", "train.steps = 7"), "changed.toml")
    result = run_cli(["sweep", str(changed), "--no-progress", *ready_stores.args()])
    assert result.exit_code == 2 and "made from a different spec" in result.output


def test_added_seeds_run_only_the_new_cells(ready_stores: Stores, tmp_path: Path) -> None:
    small = SPEC.replace("train.lr = [0.1, 5.0]", "train.lr = [0.1]")
    spec = write_spec(tmp_path, small.replace("seeds = [0, 1]", "seeds = [0]"))
    assert run_cli(["sweep", str(spec), "--no-progress", *ready_stores.args()]).exit_code == 0
    study = optuna.load_study(study_name="toy", storage=trial_queue(str(ready_stores.storage)).open())
    first = {t.user_attrs["cell"]: (t.number, t.datetime_complete) for t in study.get_trials()}
    assert len(first) == 2
    more = write_spec(tmp_path, small.replace("seeds = [0, 1]", "seeds = [0, 1, 2]"), "more.toml")
    result = run_cli(["sweep", str(more), "--no-progress", *ready_stores.args()])
    assert result.exit_code == 0, result.output
    assert "4 of 6 trial(s) to run" in result.output
    trials = study.get_trials()
    assert len(trials) == 6 and all(t.state == TrialState.COMPLETE for t in trials)
    again = {t.user_attrs["cell"]: (t.number, t.datetime_complete) for t in trials}
    assert {k: again[k] for k in first} == first  # the earlier seeds' trials were not run again
    assert sorted(json.loads(c)["seed"] for c in again) == [0, 0, 1, 1, 2, 2]


def test_the_seed_is_a_user_attribute_not_a_searched_parameter(ready_stores: Stores) -> None:
    # optuna-dashboard ranks parameters by importance: a seed among them would rank first and mean nothing
    text = SPEC.replace("train.lr = [0.1, 5.0]", "train.lr = [0.1, 0.2]")
    result = ready_stores.sweep(parse_spec(tomllib.loads(text)), backend=TOY)
    assert result.failed == 0
    study = optuna.load_study(study_name="toy", storage=trial_queue(str(ready_stores.storage)).open())
    trials = study.get_trials()
    assert len(trials) == 8 and all(set(t.params) == {"train.lr", "train.overlong_mask"} for t in trials)
    assert sorted(t.user_attrs["seed"] for t in trials) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert all(t.user_attrs["seed"] == json.loads(t.user_attrs["cell"])["seed"] for t in trials)
    assert set(optuna.importance.get_param_importances(study)) == {"train.lr", "train.overlong_mask"}
    # the trial's run was trained with that seed
    client = tracking.resolve_store(ready_stores.tracking_uri).client()
    for t in trials:
        run = client.get_run(t.user_attrs["mlflow_run_id"])
        assert run.data.tags["simlab.seed"] == str(t.user_attrs["seed"]) == run.data.params["train.seed"]


def test_tpe_trials_record_their_seed_too(ready_stores: Stores) -> None:
    text = SPEC.replace("train.lr = [0.1, 5.0]", 'train.lr = { type = "float", low = 0.05, high = 0.2 }')
    text = text.replace('seeds = [0, 1]', 'seeds = [0, 1]\nsampler = "tpe"\nn_trials = 4')
    text = text.replace("train.overlong_mask = [true, false]", "")
    ready_stores.sweep(parse_spec(tomllib.loads(text)), backend=TOY)
    trials = optuna.load_study(study_name="toy", storage=trial_queue(str(ready_stores.storage)).open()).get_trials()
    assert [set(t.params) for t in trials] == [{"train.lr"}] * 4
    assert sorted(t.user_attrs["seed"] for t in trials) == [0, 0, 1, 1]


def test_a_tpe_sweep_played_again_draws_the_same_values(tmp_path: Path, empty_mlflow_db: Path) -> None:
    # each trial's sampler is seeded by the study and the trial's number (plan.trial_seed): one worker
    # from an empty store replays a sweep's draws exactly
    text = SPEC.replace("train.lr = [0.1, 5.0]", 'train.lr = { type = "float", low = 0.05, high = 0.2 }')
    text = text.replace('seeds = [0, 1]', 'seeds = [0, 1]\nsampler = "tpe"\nn_trials = 4')
    text = text.replace("train.overlong_mask = [true, false]", "")
    drawn = []
    for name in ("first", "second"):
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(empty_mlflow_db, folder / "mlflow.db")
        stores = Stores(folder, f"sqlite:///{folder / 'mlflow.db'}", folder / "journal.log")
        stores.sweep(parse_spec(tomllib.loads(text)), backend=TOY, workers=1)
        trials = optuna.load_study(study_name="toy", storage=trial_queue(str(stores.storage)).open()).get_trials()
        drawn.append([t.params["train.lr"] for t in trials])
    assert drawn[0] == drawn[1] and len(set(drawn[0])) == 4, drawn
