"""Variant labels by key path: written once, read back, and older leaf-key labels read by key path."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simlab import names
from simlab.errors import SpecError
from simlab.sweep import labels, parse_spec
from simlab.sweep.space import Cell
from simlab.sweep.spec_parse import load_spec

ROOT = Path(__file__).resolve().parents[2]


def test_a_cells_label_spells_key_paths_sorted_with_the_variant_bundle() -> None:
    cell = Cell({"variant": "duo", "train.estimator": "rollout_group", "harness.window": 48}, 3)
    assert cell.variant == "harness.window=48,train.estimator=rollout_group,variant=duo"
    assert cell.label == cell.variant + ",seed=3"
    assert Cell({}, 0).variant == labels.BASE_VARIANT == "base"


def test_parse_label_keeps_values_with_commas_whole() -> None:
    got = labels.parse_label("task.horizon=[8, 8],variant=compaction")
    assert got == {"task.horizon": "[8, 8]", "variant": "compaction"}


def test_a_leaf_label_is_read_by_key_path_and_a_key_path_label_is_left_alone() -> None:
    axes = dict.fromkeys(["task.preset", "train.steps"])
    assert labels.canonical_label("preset=peekread-pos,steps=0", axes) == "task.preset=peekread-pos,train.steps=0"
    assert labels.canonical_label("task.preset=peekread-pos,train.steps=0", axes) == \
        "task.preset=peekread-pos,train.steps=0"
    assert labels.canonical_label("base", axes) == "base"
    # the variant key is the spec's bundle, never a config key; a key that stands for nothing stays
    assert labels.canonical_label("variant=duo,zzz=1", axes) == "variant=duo,zzz=1"


def test_two_key_paths_sharing_a_leaf_are_told_apart_by_the_value_or_left_as_written() -> None:
    logged = {"base.steps": "300", "train.steps": "0", "task.preset": "peekread-pos"}
    assert labels.canonical_label("preset=peekread-pos,steps=0", logged) == "task.preset=peekread-pos,train.steps=0"
    both = {"base.lr": "0.001", "train.lr": "0.001"}
    assert labels.canonical_label("lr=0.001", both) == "lr=0.001"  # no single path: never guessed


@given(st.dictionaries(st.sampled_from(["task.preset", "train.estimator", "harness.window", "variant"]),
                       st.text(alphabet="abc019-_", min_size=1, max_size=6), min_size=1))
def test_every_label_reads_back_and_its_leaf_spelling_reads_to_it(params: dict[str, str]) -> None:
    text = labels.label(params)
    assert labels.parse_label(text) == {k: params[k] for k in sorted(params)}
    leafy = ",".join(f"{labels.leaf(k)}={v}" for k, v in sorted(params.items()))
    assert labels.canonical_label(leafy, dict.fromkeys(params)) == text
    assert labels.respelt(leafy, [text]) == (None if leafy == text else text)


def test_a_stored_run_is_read_by_key_path_from_its_tags_and_logged_params() -> None:
    params = {"train.estimator": "rollout_group", "train.normaliser": "token", "base.steps": "300"}
    new = "train.estimator=rollout_group,train.normaliser=token"
    assert labels.stored_variant({names.VARIANT_TAG: new}, params) == new
    assert labels.stored_variant({names.VARIANT_TAG: "estimator=rollout_group,normaliser=token"}, params) == new
    # before the variant tag: the cell tag less its seed
    assert labels.stored_variant({names.CELL_TAG: "estimator=rollout_group,normaliser=token,seed=4"}, params) == new
    assert labels.stored_variant({}, params) is None


def test_a_spec_baseline_with_leaf_keys_is_refused_naming_the_label_to_write() -> None:
    raw = tomllib.loads((ROOT / "sweeps" / "quick.toml").read_text(encoding="utf-8"))
    assert load_spec(ROOT / "sweeps" / "quick.toml").baseline == "train.normaliser=token"
    with pytest.raises(SpecError) as err:
        parse_spec({**raw, "baseline": "normaliser=token"})
    assert str(err.value) == ("`baseline='normaliser=token'` is invalid; write 'train.normaliser=token' "
                              "(a label spells each setting by its key path, as --set does)")


def test_every_shipped_spec_baseline_names_one_of_its_variants_by_key_path() -> None:
    for path in sorted((ROOT / "sweeps").rglob("*.toml")):
        spec = load_spec(path)
        if spec.baseline is not None:
            keys = labels.parse_label(spec.baseline)
            assert all(k == labels.VARIANT_KEY or "." in k for k in keys), path
