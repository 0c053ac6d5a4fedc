"""Base quality: the base against its teacher and its floor, cloning checks, and the base-quality gate."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

from simlab import names
from simlab.config import resolve
from simlab.errors import BaseGateError, ConfigError
from simlab.policy.checkpoint import load_checkpoint
from simlab.policy.model import Policy
from simlab.sinks import JsonlSink, read_metrics
from simlab.train import train
from simlab.train.base import base_checkpoint
from simlab.train.identity import base_key, base_path, base_seed
from simlab.train.quality import CHECK_SEEDS, Quality, check_seed, measure
from simlab.update import SGD

from .conftest import tiny
from .test_train import cli


def test_quality_gain_and_its_se_by_hand():
    q = Quality(base=np.array([1.0, 1.0, 0.0, 1.0]), floor=np.array([0.0, 1.0, 0.0, 0.0]))
    # differences 1, 0, 0, 1: mean 0.5, SD (ddof 1) sqrt(1/3), SE sqrt(1/3) / 2
    assert q.gain == 0.5
    assert math.isclose(q.gain_se, math.sqrt(1 / 3) / 2)
    assert not q.clear  # 0.5 < 2 x 0.289
    assert q.describe() == "success 75.0%, floor 25.0% (+50.0 ± 28.9 points)"
    sure = Quality(base=np.ones(8), floor=np.zeros(8))
    assert sure.gain == 1.0 and sure.gain_se == 0.0 and sure.clear
    tied = Quality(base=np.ones(8), floor=np.ones(8))
    assert not tied.clear


def test_floor_plays_the_same_instances_without_summaries(tmp_path):
    cfg = resolve(tiny())
    policy = Policy(cfg.policy.replace(value_head=False))
    quality, batches = measure(cfg, policy, seed=cfg.eval_seed, episodes=8, teacher=True)
    assert set(batches) == {"base", "floor", "teacher"}
    assert all(r.summaries == 0 for r in batches["floor"].rollouts)
    assert sum(r.summaries for r in batches["base"].rollouts) > 0  # tiny's window forces compactions
    assert quality.teacher is not None and quality.teacher.size == 8


def run(tmp_path, nested, name="run"):
    sink = JsonlSink(tmp_path / name)
    train(resolve(nested), sink, store=tmp_path / "store")
    sink.close()
    return read_metrics(tmp_path / name)


def test_every_run_logs_its_base_beside_teacher_and_floor_at_step_0(tmp_path):
    rows = run(tmp_path, tiny())
    first = rows[0]
    assert first["step"] == 0 and names.EVAL_COMPACTED_SUCCESS in first  # one row for step 0
    for prefix in names.BASE_HELDOUT_PREFIXES.values():
        assert 0.0 <= first[names.metric(prefix, names.SUCCESS)] <= 1.0
    base, floor = (first[names.metric(p, names.SUCCESS)] for p in (names.BASE_HELDOUT, names.BASE_HELDOUT_FLOOR))
    assert math.isclose(first[names.BASE_GAIN], base - floor, abs_tol=1e-12)
    assert first[names.metric(names.BASE_HELDOUT_FLOOR, names.SUMMARY_LENGTH)] is None  # no summary written
    assert not any(k.startswith("base/") for r in rows[1:] for k in r)
    # arms that share the base and the held-out set measure it once: the second run reads the cache
    cache = list((tmp_path / "store" / "base").glob("*/quality/*.json"))
    assert len(cache) == 1
    assert json.loads(cache[0].read_text())[names.BASE_GAIN] == first[names.BASE_GAIN]
    other = run(tmp_path, tiny(train={"lr": 3e-4}), "other")[0]  # an arm that differs only in RL
    assert other[names.BASE_GAIN] == first[names.BASE_GAIN]
    assert len(list((tmp_path / "store" / "base").glob("*/quality/*.json"))) == 1


def test_base_quality_off_logs_nothing_and_changes_no_other_metric(tmp_path):
    on = run(tmp_path, tiny(), "on")
    off = run(tmp_path, tiny(eval={"base_quality": False}), "off")
    assert not any(k.startswith("base/") for r in off for k in r)
    strip = [{k: v for k, v in r.items() if not k.startswith(("base/", "perf/"))} for r in on]
    assert strip == [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in off]


def test_checks_during_cloning_are_kept_with_the_checkpoint(tmp_path):
    cfg = resolve(tiny(base={"steps": 3, "check_every": 2, "check_episodes": 8}))
    sink = JsonlSink(tmp_path / "base")
    path = base_checkpoint(cfg, tmp_path / "store", sink=sink)
    sink.close()
    rows = read_metrics(tmp_path / "base")
    checked = [r["step"] for r in rows if names.BASE_CHECK_SUCCESS in r]
    assert checked == [1, 2]  # after step 2 (every 2) and after the last step, 3 (rows are 0-based)
    _, meta = load_checkpoint(path)
    assert meta["check"]["steps"] == 3 and meta["check"]["episodes"] == 8
    assert meta["check"]["metrics"][names.BASE_CHECK_SUCCESS] == rows[-1][names.BASE_CHECK_SUCCESS]
    curve = meta["check"]["curve"]  # every check, in order, as logged
    assert [c["steps"] for c in curve] == [2, 3]
    assert [c[names.BASE_CHECK_SUCCESS] for c in curve] == [r[names.BASE_CHECK_SUCCESS] for r in rows
                                                              if names.BASE_CHECK_SUCCESS in r]
    assert check_seed(cfg) == CHECK_SEEDS + base_seed(cfg) * 100_000


def test_new_base_settings_at_their_defaults_keep_the_base_key():
    plain = resolve(tiny())
    spelled = resolve(tiny(base={"check_episodes": 128, "max_steps": None, "min_gain": None}))
    assert base_key(plain) == base_key(spelled)
    assert base_key(resolve(tiny(base={"check_every": 1}))) != base_key(plain)


def test_a_numeric_eval_seed_that_moves_the_cloning_instances_moves_the_base_key():
    plain = resolve(tiny())
    assert base_key(resolve(tiny(eval={"seed": "run"}))) == base_key(plain)  # both clone below 1,000,000
    moved = resolve(tiny(eval={"seed": 500_000}))
    assert moved.train_seed_limit == 500_000 and base_key(moved) != base_key(plain)


def test_cloning_goes_on_past_steps_until_the_cap_when_the_gate_is_missed(tmp_path):
    nested = tiny(base={"steps": 1, "check_every": 1, "check_episodes": 4, "max_steps": 3, "min_gain": 100})
    cfg = resolve(nested)
    path = base_checkpoint(cfg, tmp_path / "store")
    _, meta = load_checkpoint(path)
    assert meta["check"]["steps"] == 3  # a gain of 100 points is out of reach: cloned to the cap
    with pytest.raises(BaseGateError, match=r"base model of seed 0 missed the gate `base.min_gain=100` after 3"):
        train(cfg, JsonlSink(tmp_path / "run"), store=tmp_path / "store")
    plateau = resolve(tiny(base={"steps": 1, "check_every": 1, "check_episodes": 4, "max_steps": 50,
                                 "patience": 1, "seed": 1}))
    _, meta = load_checkpoint(base_checkpoint(plateau, tmp_path / "store"))
    assert meta["check"]["steps"] < 50  # stopped at the first check without a new best


def test_a_gate_of_zero_points_is_cleared_at_the_first_check_past_steps(tmp_path):
    cfg = resolve(tiny(base={"steps": 1, "check_every": 1, "check_episodes": 4, "max_steps": 9, "min_gain": 0,
                             "seed": 2}))
    _, meta = load_checkpoint(base_checkpoint(cfg, tmp_path / "store"))
    gain = meta["check"]["metrics"][names.BASE_CHECK_GAIN]
    assert meta["check"]["steps"] == 1 if gain >= 0 else meta["check"]["steps"] > 1


def test_cli_gate_refusal_exits_2_in_one_line_and_writes_no_run(tmp_path):
    args = ["--set", "base.check_every=1", "--set", "base.check_episodes=4", "--set", "base.min_gain=100"]
    for key, values in tiny().items():
        if key != "base":
            args += [a for k, v in values.items() for a in ("--set", f"{key}.{k}={json.dumps(v)}")]
    out = cli("train", "--set", "base.steps=1", "--set", "base.episodes=8", *args, "--out", str(tmp_path / "r"),
              "--store", str(tmp_path / "store"))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: base model of seed 0 missed the gate"), lines
    assert "floor" in lines[0] and "points" in lines[0]
    assert not (tmp_path / "r").exists()
    assert base_path(resolve(tiny(base={"steps": 1, "check_every": 1, "check_episodes": 4, "min_gain": 100})),
                     tmp_path / "store").exists()  # the base stays cached: a rerun refuses at once


@pytest.mark.parametrize(("base", "match"), [
    ({"min_gain": 5}, "`base.min_gain=5` is invalid; it reads the cloning checks"),
    ({"patience": 2}, "`base.patience=2` is invalid; it reads the cloning checks"),
    ({"check_every": 1, "max_steps": 1}, "`base.max_steps=1` is invalid; it caps cloning past base.steps=2"),
    ({"check_every": 1, "max_steps": 9}, "`base.max_steps=9` is invalid; cloning goes past base.steps only"),
    ({"min_gain": 101, "check_every": 1}, "`base.min_gain=101` is invalid"),
    ({"check_episodes": 1}, "`base.check_episodes=1` is invalid"),
    ({"summary_weight": 0}, "`base.summary_weight=0` is invalid"),
])
def test_bad_base_check_settings_are_refused(base, match):
    with pytest.raises(ConfigError, match=match.replace("(", r"\(")):
        resolve(tiny(base=base))


def test_cli_refuses_a_bad_gate_before_writing(tmp_path):
    out = cli("train", "--set", "base.min_gain=5", "--out", str(tmp_path / "r"), "--store", str(tmp_path / "s"))
    assert out.returncode == 2 and "base.min_gain" in out.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "s").exists()
    missing = cli("base", "--out", str(tmp_path / "nowhere"), "--store", str(tmp_path / "s"))
    assert missing.returncode == 2 and "`--out=" in missing.stderr and not (tmp_path / "s").exists()
    flag = cli("base", "--set", "task.distractors=2", "--store", str(tmp_path / "s"))
    assert flag.returncode == 2 and "task.distractors" in flag.stderr and not (tmp_path / "s").exists()



def test_seeds_option_reads_lists_and_ranges():
    from simlab.cli.play import parse_seeds

    assert parse_seeds("20-27") == list(range(20, 28))
    assert parse_seeds("0,3,5-7,3") == [0, 3, 5, 6, 7]
    for bad in ("", "a", "5-3", "1-", "-2", "1.5"):
        with pytest.raises(ConfigError, match=r"`--seeds=.*` is invalid; give seeds as integers and ranges"):
            parse_seeds(bad)


def test_base_table_flags_by_hand():
    from simlab.analysis.report.bases import base_markdown, base_row, base_table

    def metrics(base, floor, teacher, se):
        out = {names.metric(names.BASE_HELDOUT, names.SUCCESS): base,
               names.metric(names.BASE_HELDOUT_FLOOR, names.SUCCESS): floor,
               names.metric(names.BASE_HELDOUT_TEACHER, names.SUCCESS): teacher,
               names.BASE_GAIN: base - floor, names.BASE_GAIN_SE: se, names.BASE_TEACHER_LEAD: teacher - base,
               names.BASE_ABOVE_FLOOR: float(base - floor > 2 * se)}
        return out

    rows = [base_row(1, metrics(0.60, 0.20, 0.65, 0.05), 300), base_row(0, metrics(0.18, 0.17, 1.0, 0.04), 300)]
    assert base_row(2, {}) is None  # a run that did not measure its base
    text = base_markdown(base_table(rows))
    lines = [line for line in text.splitlines() if line.startswith("| 0") or line.startswith("| 1")]
    assert lines[0].split("|")[1].strip() == "0" and lines[0].rstrip(" |").endswith("at floor, far from teacher")
    assert "| 40.0 ± 5.0" in lines[1] and lines[1].rstrip(" |").endswith("ok")
    assert "1 of 2 bases clearly above their floor; 1 of 2 within 10 points of their teacher." in text


def test_cli_base_measures_each_seed_and_writes_its_table(tmp_path):
    args = [a for key, values in tiny().items() for k, v in values.items()
            for a in ("--set", f"{key}.{k}={json.dumps(v)}")]
    (tmp_path / "out").mkdir()
    out = cli("base", *args, "--set", 'base.seed="run"', "--set", 'eval.seed="run"', "--seeds", "3,4",
              "--store", str(tmp_path / "store"), "--out", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    seeds = [line.split("|")[1].strip() for line in out.stdout.splitlines() if line.startswith(("| 3", "| 4"))]
    assert seeds == ["3", "4"]
    assert "of 2 bases clearly above their floor" in out.stdout
    assert (tmp_path / "out" / "base-quality.csv").read_text().splitlines()[0].startswith("seed,base_steps,base,")
    assert len(list((tmp_path / "store" / "base").glob("*.pt"))) == 2  # base.seed = "run": one base per seed
    assert not (tmp_path / "out" / "base-checks.csv").exists()  # no base.check_every: no checks to write
    again = cli("base", *args, "--set", 'base.seed="run"', "--set", 'eval.seed="run"', "--seeds", "3,4",
                "--set", "base.check_every=1", "--set", "base.check_episodes=4",
                "--store", str(tmp_path / "store"), "--out", str(tmp_path / "out"))
    assert again.returncode == 0, again.stderr
    checks = pl.read_csv(tmp_path / "out" / "base-checks.csv")
    assert checks["seed"].to_list() == [3] * 2 + [4] * 2 and checks["steps"].to_list() == [1, 2, 1, 2]
    assert "Cloning checks" in (tmp_path / "out" / "base-checks.md").read_text()


def test_cli_base_refuses_bad_seeds_before_building(tmp_path):
    out = cli("base", "--seeds", "7-2", "--store", str(tmp_path / "store"))
    assert out.returncode == 2 and "`--seeds='7-2'` is invalid" in out.stderr
    assert not (tmp_path / "store").exists()


def test_summary_weight_weighs_the_teachers_summary_tokens_in_the_cloning_loss():
    import torch

    from simlab.harness.phases import phase_table
    from simlab.harness.protocol import Phase
    from simlab.train.base import base_harness, imitation_step
    from simlab.train.rollouts import collect
    from simlab.train.tokens import TokenBatch, score

    cfg = resolve(tiny())
    harness = base_harness(cfg)
    rb, env, _ = collect(cfg, None, harness=harness, prompts=4, group_size=1, seed=0, teacher="scripted")
    table = torch.from_numpy(phase_table(env, harness.trigger))
    tb = TokenBatch.from_rollouts(rb, torch.device("cpu"))
    policy = Policy(cfg.policy.replace(value_head=False))
    with torch.no_grad():
        lp = score(policy, tb, table, 1.0).logprobs.double()
    summary = tb.optimised & (tb.phase == int(Phase.SUMMARY))
    assert 0 < int(summary.sum()) < int(tb.optimised.sum())
    for w in (1.0, 4.0):
        opt = SGD(policy.parameters(), lr=0.0)  # lr 0: the policy stays as scored above
        loss = float(imitation_step(policy, opt, tb, table, 0, 0, summary_weight=w))
        plain = tb.optimised & ~summary
        want = -(lp[plain].sum() + w * lp[summary].sum()) / (plain.sum() + w * summary.sum())
        assert math.isclose(loss, float(want), rel_tol=1e-5)


def test_campaign_table_counts_the_seeds_that_meet_each_bar(tmp_path):
    from simlab.analysis.report.bases import base_table, campaign_markdown, campaign_rows

    def row(seed, base, floor, teacher, se):
        return {"seed": seed, "base_steps": 300, "base": base, "teacher": teacher, "floor": floor,
                "gain": base - floor, "gain_se": se, "above_floor": base - floor > 2 * se,
                "teacher_lead": teacher - base, "base_holds_answer": None, "teacher_holds_answer": None,
                "base_holds_cued": None, "teacher_holds_cued": None}

    base_table([row(1, 0.5, 0.2, 0.55, 0.04), row(2, 0.3, 0.2, 0.7, 0.04), row(3, 0.45, 0.2, 0.5, 0.2)]) \
        .write_csv(tmp_path / "a.csv")
    (r,) = campaign_rows(tmp_path)
    assert (r["seeds"], r["steps"], r["above_floor"], r["near_teacher"], r["floor_target"]) == (3, 300, 2, 2, 2)
    assert math.isclose(r["base"], 0.4166666, rel_tol=1e-5) and math.isclose(r["gain_median"], 0.25)
    row_a = "| `a`    | 3     | 300           | 41.7 | 58.3    | 20.0  | 25.0        | 2 of 3"
    assert row_a in campaign_markdown(tmp_path)
    gated = [{**row(1, 0.5, 0.2, 0.55, 0.04), "base_steps": 3000}, {**row(2, 0.3, 0.2, 0.7, 0.04), "base_steps": 8000}]
    base_table(gated).write_csv(tmp_path / "a.csv")  # a gate stops each seed where it clears: a range of steps
    assert "| `a`    | 2     | 3000-8000     |" in campaign_markdown(tmp_path)
