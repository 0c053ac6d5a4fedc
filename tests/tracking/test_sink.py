"""MlflowSink and the store helpers against a real sqlite MLflow store in a tmp folder."""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl
import pytest

from simlab import tracking
from simlab.errors import ConfigError
from simlab.sinks import MetricSink
from simlab.tracking.figures import segment_histogram_images, segment_histogram_table
from tests.stores import Stores


def _sweep_runs(stores: Stores) -> tuple[object, str, str]:
    store = tracking.resolve_store(stores.tracking_uri)
    client = tracking.prepare(store)
    experiment_id = tracking.ensure_experiment(client, "sink-test", store)
    parent = tracking.parent_run(client, experiment_id, "sink-test", {"simlab.sampler": "grid"})
    child = tracking.child_run(client, experiment_id, parent, "0:cell", {tracking.TRIAL_TAG: "0"})
    return client, parent, child


def test_store_defaults_are_absolute_and_overridable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tracking.TRACKING_ENV, raising=False)
    store = tracking.resolve_store(root=tmp_path)
    assert store.tracking_uri == f"sqlite:///{tmp_path.resolve()}/mlruns/mlflow.db"
    assert store.artifact_root == (tmp_path.resolve() / "mlruns" / "artifacts").as_uri()
    assert store.local_folder == tmp_path.resolve() / "mlruns"
    monkeypatch.setenv(tracking.TRACKING_ENV, "sqlite:////elsewhere/x.db")
    assert tracking.resolve_store(root=tmp_path).tracking_uri == "sqlite:////elsewhere/x.db"
    assert tracking.resolve_store("http://127.0.0.1:5000", tmp_path).artifact_root is None
    with pytest.raises(ConfigError, match="refuses a plain file store"):
        tracking.resolve_store("mlruns", tmp_path)


def test_sink_batches_params_metrics_and_closes_with_reason(ready_stores: Stores) -> None:
    client, parent, child = _sweep_runs(ready_stores)
    sink = tracking.MlflowSink(client, child)
    assert isinstance(sink, MetricSink)
    sink.log_params({"train": {"lr": 0.001, "estimator": "gae_concat"}, "note": "x" * 7000})
    sink.set_tags({"simlab.recipe": "supo"})
    # 1500 metrics in one step: more than one log_batch may carry, so they must be chunked
    wide = {f"probe/m{i:04d}": float(i) for i in range(1500)}
    sink.log_metrics(
        {**wide, "compaction_rate": 0.25, "health/segments/count_1": 6.0, "health/segments/count_2": 2.0},
        step=0,
    )
    sink.log_metrics(
        {
            "compaction_rate": 0.5,
            "health/segments/count_1": 4.0,
            "health/segments/count_3": 4.0,
            "train/loss": float("nan"),
        },
        step=1,
    )
    sink.close("FAILED", "TrainingDiverged: loss is nan at step 1")

    run = client.get_run(child)
    assert run.info.status == "FAILED"
    assert run.data.tags[tracking.REASON_TAG] == "TrainingDiverged: loss is nan at step 1"
    assert run.data.tags[tracking.PARENT_TAG] == parent
    assert run.data.tags["simlab.recipe"] == "supo"
    assert run.data.params["train.lr"] == "0.001" and run.data.params["train.estimator"] == "gae_concat"
    assert len(run.data.params["note"]) <= tracking.MAX_PARAM_CHARS
    assert len([k for k in run.data.metrics if k.startswith("probe/")]) == 1500
    history = client.get_metric_history(child, "compaction_rate")
    assert [(m.step, m.value) for m in history] == [(0, 0.25), (1, 0.5)]

    table_dir = Path(client.download_artifacts(child, "tables"))
    table = pl.read_parquet(table_dir / "segment_histogram.parquet")
    assert table.filter(pl.col("step") == 1).sort("segments").select("segments", "share").rows() == [
        (1, 0.5),
        (3, 0.5),
    ]
    assert table.filter(pl.col("step") == 0).get_column("share").to_list() == [0.75, 0.25]
    figures = {a.path for a in client.list_artifacts(child, "figures")}
    assert "figures/learning_curve.png" in figures
    # the histogram images are step-indexed (MLflow's image slider)
    images = [a.path for a in client.list_artifacts(child, "images")]
    assert any(p.startswith("images/segment_histogram+step+1+") for p in images), images


def test_parent_run_is_reused_on_resume(ready_stores: Stores) -> None:
    client, parent, _ = _sweep_runs(ready_stores)
    tracking.finish_run(client, parent)
    experiment_id = client.get_run(parent).info.experiment_id
    again = tracking.parent_run(client, experiment_id, "sink-test", {})
    assert again == parent and client.get_run(parent).info.status == "RUNNING"
    with pytest.raises(Exception, match="RUNNIN"):
        tracking.finish_run(client, parent, "RUNNIN")


def test_histogram_image_and_table_from_rows() -> None:
    rows = [{"step": float(s), "segments/count_1": 10.0 - s, "segments/count_2": float(s)} for s in range(10)]
    table = segment_histogram_table(rows)
    assert table.height == 20
    images = segment_histogram_images(table, snapshots=3)
    assert [step for step, _ in images] == [0, 4, 9] or [step for step, _ in images] == [0, 5, 9]
    buf = io.BytesIO()
    images[-1][1].save(buf, format="PNG")
    assert buf.tell() > 500
    assert segment_histogram_table([{"step": 0.0, "loss": 1.0}]).height == 0
