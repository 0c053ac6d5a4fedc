"""Metric, tag and param names are defined once (``simlab.names``): everything a run logs is declared."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from simlab import names
from simlab.config import flatten, resolve
from simlab.train import train
from simlab.train.base import base_checkpoint
from tests.trainer.conftest import _one_thread, tiny  # noqa: F401  (the autouse fixture applies here too)

ROOT = Path(__file__).resolve().parents[1]


class Recorder:
    """A MetricSink that keeps every metric key and param it is given."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.params: dict[str, Any] = {}

    def log_params(self, params: dict[str, Any]) -> None:
        self.params.update(params)

    def set_tags(self, tags: dict[str, str]) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.keys.update(metrics)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        pass

    def close(self, status: str = "FINISHED", reason: str = "") -> None:
        pass


@pytest.mark.parametrize(
    "settings",
    [
        {},  # supo: group estimator, rollout-group advantage gap
        {"train": {"recipe": "compactionrl", "value_pretrain_steps": 1, "group_size": 1, "prompts": 4},
         "harness": {"window": 64}},  # PPO: value loss, pretraining prefix, errors against the GAE reference
    ],
    ids=["supo", "compactionrl"],
)
def test_every_logged_metric_is_declared(tmp_path: Path, settings: dict[str, Any]) -> None:
    cfg = resolve(tiny(**settings))
    base, run = Recorder(), Recorder()
    base_checkpoint(cfg, tmp_path, sink=base)  # behaviour cloning's own metrics
    final = train(cfg, run, store=tmp_path)
    logged = base.keys | run.keys | set(final)
    assert {k for k in logged if not names.declared(k)} == set()
    assert names.EVAL_COMPACTED_SUCCESS in final and names.BASE_LOSS in base.keys
    assert set(final) == set(names.result_metrics(single_window=cfg.eval.single_window))  # a sweep's objectives
    assert run.params == flatten(cfg)


def test_declared_refuses_drift() -> None:
    assert names.declared("eval/compacted/success") and names.declared("health/segments/count_12")
    assert not names.declared("eval/compacted_success")  # the spelling spec.py once documented
    assert not names.declared("health/segments/count_x") and not names.declared("loss/policy")


def _spec_metrics() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "sweeps").rglob("*.toml")):
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        out.append((path.name, raw["objective"]["metric"]))
        for row in raw.get("findings", []):
            out += [(path.name, row["metric"])] + ([(path.name, row["x"])] if "x" in row else [])
            out += [(path.name, m["metric"]) for m in row.get("mechanism", [])]
    return out


@pytest.mark.parametrize(("spec", "metric"), _spec_metrics())
def test_every_metric_a_spec_names_is_declared(spec: str, metric: str) -> None:
    assert names.declared(metric), f"{spec} names {metric!r}, which no run logs"


def test_config_tags_and_report_params_are_run_config_keys() -> None:
    flat = flatten(resolve({}))
    assert set(names.CONFIG_TAG_KEYS) <= set(flat)
    params = {names.PARAM_EPISODES, names.PARAM_WINDOW, names.PARAM_FRAC, names.PARAM_MAX_COMPACTIONS,
              names.PARAM_TRIGGER, names.PARAM_T_COMP}
    assert params <= set(flat)
    assert len(set(names.TAGS)) == len(names.TAGS)
