"""Issue 42 end to end: a variable-length summary run and a cued-task run from ``simlab train`` and from
``simlab sweep`` (smoke-sized), with the summary metrics in what they write."""

from __future__ import annotations

import json
import os
from pathlib import Path

from simlab import names
from tests.test_bad_input import run

SPEC = """name = "summaries-smoke"
seeds = [3]
sampler = "grid"
baseline = "variant=budget"

[base]
train.recipe = "supo"

[[variants]]
name = "budget"
set = { task.preset = "keyrecall-mark-budget" }

[[variants]]
name = "cue-half"
[variants.set]
task.preset = "keyrecall-cue"
task.cue_reliability = 0.5
train.summary_loss = "separate"
train.summary_weight = 2.0

[objective]
metric = "eval/compacted/summary_holds_cued"
direction = "maximize"
"""


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "SIMLAB_SMOKE": "1", "SIMLAB_HOME": str(home)}


def test_a_variable_length_run_from_simlab_train(tmp_path: Path) -> None:
    out = run("train", "--set", "task.preset=keyrecall-mark-budget", "--out", str(tmp_path / "run"),
              "--store", str(tmp_path / "store"), env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    final = rows[-1]
    length = final[names.metric(names.EVAL_COMPACTED, names.SUMMARY_LENGTH)]
    assert 0 <= length <= 7  # the preset's budget; a smoke-sized base ends its summaries anywhere
    assert 0 <= final[names.metric(names.EVAL_COMPACTED, names.SUMMARY_HOLDS_CUED)] <= 1
    assert any(names.health(names.STALL) in row for row in rows)


def test_a_cued_sweep_from_simlab_sweep(tmp_path: Path) -> None:
    (tmp_path / "spec.toml").write_text(SPEC)
    out = run("sweep", "spec.toml", "--no-progress", cwd=tmp_path, env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "## simlab report: summaries-smoke" in out.stdout
    assert "summaries holding the cued fact (%)" in out.stdout
