"""Sweep specs: shipped specs parse; each bad spec exits 2 naming the key, and writes to neither store."""

from __future__ import annotations

from pathlib import Path

import pytest

from simlab.sweep import SpecError, load_spec, parse_spec
from tests.stores import Stores, run_cli, write_spec

GOOD = """
seeds = [0, 1]
[base]
train.steps = 3
[space]
"train.lr" = [0.1, 0.2]
train.estimator = ["rollout_group", "gae_concat"]
[objective]
metric = "eval/compacted_success"
"""

# (what is wrong, spec text, words the error must contain)
BAD = [
    ("unknown key path", GOOD.replace('"train.lr"', '"train.lrr"'), ["train.lrr", "choose one of"]),
    ("wrong type in config", GOOD.replace("[0.1, 0.2]", '["fast", 0.2]'), ["train.lr='fast'", "number > 0"]),
    (
        "wrong type in spec",
        GOOD.replace("seeds = [0, 1]", 'seeds = "0"'),
        ["`seeds='0'`", "non-empty list, each item: an integer"],
    ),
    ("empty grid", GOOD.replace("[0.1, 0.2]", "[]"), ["space.train.lr", "at least one value"]),
    (
        "unknown estimator",
        GOOD.replace('"gae_concat"', '"grpo"'),
        ["space.train.estimator", "'grpo'", "'rollout_group'", "'gae_concat'"],
    ),
    (
        "unknown normaliser",
        GOOD.replace("train.steps = 3", 'train.normaliser = "mean"'),
        ["base.train.normaliser='mean'", "'token'", "'segment'"],
    ),
    ("duplicate seeds", GOOD.replace("seeds = [0, 1]", "seeds = [0, 1, 0]"), ["seeds", "repeated: [0]"]),
    ("unknown spec key", GOOD + "\nsampler_kind = 'grid'\n", ["sampler_kind", "choose one of"]),
    (
        "distribution on grid",
        GOOD.replace("[0.1, 0.2]", '{type = "float", low = 0.1, high = 0.2}'),
        ["space.train.lr", "sampler 'grid'"],
    ),
    ("objective missing", GOOD.split("[objective]")[0], ["`objective` is required"]),
    ("bad direction", GOOD + 'direction = "up"\n', ["objective.direction='up'", "'maximize'"]),
    ("not TOML", "seeds = [0,", ["not valid TOML"]),
    (  # specs written before one spelling: each old key gets the one to write
        "preset as its own key",
        GOOD.replace("[base]\n", '[base]\npreset = "keyrecall-tiny"\n'),
        ["`base.preset` is not a config key path", "write `task.preset`"],
    ),
    ("a [base.overrides] table", GOOD.replace("[base]", "[base.overrides]"), ["`[base.overrides]` is now `[base]`"]),
    (
        "baseline not a variant",
        'baseline = "train.estimator=grpo,train.lr=0.1"\n' + GOOD,
        ["baseline='train.estimator=grpo,train.lr=0.1'", "'train.estimator=rollout_group,train.lr=0.1'",
         "'train.estimator=gae_concat,train.lr=0.2'"],
    ),
    (
        "baseline with leaf keys",
        'baseline = "estimator=gae_concat,lr=0.2"\n' + GOOD,
        ["baseline='estimator=gae_concat,lr=0.2'` is invalid; write 'train.estimator=gae_concat,train.lr=0.2'"],
    ),
]


def test_baseline_names_a_grid_variant() -> None:
    import tomllib

    spec = parse_spec(tomllib.loads('baseline = "train.estimator=gae_concat,train.lr=0.2"\n' + GOOD))
    assert spec.baseline == "train.estimator=gae_concat,train.lr=0.2"
    assert spec.baseline in {c.variant for c in spec.cells()}


@pytest.mark.parametrize(("case", "text", "words"), BAD, ids=[b[0] for b in BAD])
def test_bad_spec_exits_2_and_writes_nothing(
    stores: Stores, tmp_path: Path, case: str, text: str, words: list[str]
) -> None:
    spec = write_spec(tmp_path, text)
    result = run_cli(["sweep", str(spec), *stores.args()])
    assert result.exit_code == 2, (case, result.output)
    for word in words:
        assert word in result.output, (case, word, result.output)
    assert stores.written() == [], f"{case}: wrote {stores.written()}"


def test_missing_spec_file(stores: Stores, tmp_path: Path) -> None:
    result = run_cli(["sweep", str(tmp_path / "nope.toml"), *stores.args()])
    assert result.exit_code == 2 and "does not exist" in result.output
    assert stores.written() == []


def test_unknown_trial_backend_exits_2(stores: Stores, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, GOOD)
    args = ["--tracking-uri", stores.tracking_uri, "--storage", str(stores.storage), "--trial", "nowhere:X"]
    result = run_cli(["sweep", str(spec), *args])
    assert result.exit_code == 2 and "nowhere:X" in result.output
    assert stores.written() == []


def test_cells_are_grid_times_seeds() -> None:
    import tomllib

    spec = parse_spec(tomllib.loads(GOOD), default_name="good")
    cells = spec.cells()
    assert len(cells) == 2 * 2 * 2
    assert len({c.key for c in cells}) == len(cells)
    assert spec.settings(cells[0].params)["train.steps"] == 3


def test_variants_and_tpe_spec() -> None:
    import tomllib

    text = """
    sampler = "tpe"
    n_trials = 4
    seeds = [3]
    [space]
    train.lr = {type = "float", low = 1e-3, high = 1e-1, log = true}
    [[variants]]
    name = "a"
    set = {train.estimator = "gae_concat"}
    [[variants]]
    name = "b"
    set = {train.estimator = "rollout_group"}
    [objective]
    metric = "m"
    direction = "minimize"
    """
    spec = parse_spec(tomllib.loads(text))
    assert spec.sampler == "tpe" and spec.n_trials == 4
    assert spec.axes[0].dist is not None and spec.axes[0].dist.log
    assert spec.settings({"variant": "a", "train.lr": 0.01}) == {
        "train.estimator": "gae_concat",
        "train.lr": 0.01,
    }
    with pytest.raises(SpecError, match="n_trials"):
        parse_spec(tomllib.loads(text.replace("n_trials = 4", "")))


SWEEPS = sorted((Path(__file__).resolve().parents[2] / "sweeps").glob("*.toml"))


@pytest.mark.parametrize("path", SWEEPS, ids=[p.stem for p in SWEEPS])
def test_shipped_specs_parse(path: Path) -> None:
    spec = load_spec(path)
    assert spec.name == path.stem
    if spec.sampler == "grid":
        assert spec.cells()


def test_a_spec_with_120000_seeds_is_checked_in_one_pass() -> None:
    # issue 30: the duplicate-seed check counted each seed's occurrences (quadratic: over 60 s here)
    import tomllib

    many = list(range(120_000))
    spec = parse_spec(tomllib.loads(GOOD.replace("seeds = [0, 1]", f"seeds = {many}")))
    assert len(spec.seeds) == 120_000
    with pytest.raises(SpecError, match=r"repeated: \[7, 119999\]"):
        parse_spec(tomllib.loads(GOOD.replace("seeds = [0, 1]", f"seeds = {[*many, 7, 119_999]}")))
