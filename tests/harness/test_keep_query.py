"""``harness.keep_query``: the step that brings the question survives a compaction (docs/tasks-and-harness.md,
"When the discard rule takes the question away")."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.query_discard import measure
from simlab.config import resolve
from simlab.harness import run_rollouts
from simlab.train.rollouts import make_env


def _cfg(preset: str, **harness: object):
    return resolve({"task": {"preset": preset}, "train": {"recipe": "supo"}, "harness": harness})


def test_the_question_is_kept_where_the_discard_rule_took_it() -> None:
    # keyrecall-mini under SUPO (L = 27 of W = 32, k = 0): a quarter of the answer turns lose the question
    lost, kept = (measure(_cfg("keyrecall-mini", keep_query=k), "supo", 256, seed=0) for k in (False, True))
    assert lost.cut == kept.cut > 40 and lost.lost == lost.cut  # the same steps are cut; k = 0 loses them all
    assert kept.lost == 0 and kept.success == 1.0 and lost.success < 0.9  # the oracle answers every one


@pytest.mark.parametrize("preset", ["peekread-routes-c100", "keyrecall-mini"])
def test_where_no_question_is_cut_nothing_changes(preset: str) -> None:
    # with a tail step the cut step is replayed anyway; on the routes family no query step crosses L
    extra = {"tail_steps": 1} if preset == "keyrecall-mini" else {}
    batches = []
    for keep in (False, True):
        cfg = _cfg(preset, keep_query=keep, **extra)
        env = make_env(cfg, 128)
        try:
            batches.append(run_rollouts(env, "oracle", cfg.harness, seed=3, group_size=1))
        finally:
            env.close()
    a, b = batches
    assert [r.reward for r in a.rollouts] == [r.reward for r in b.rollouts]
    for x, y in zip(a.padded().values(), b.padded().values(), strict=True):
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f")  # log-probs are NaN where nothing was sampled
