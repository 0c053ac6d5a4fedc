"""The exact lines a bad sweep input gets today, pinned whole (the other bad-input tests check fragments).

Three layers, each as a user meets it:

- ``simlab sweep`` on every bad spec of :data:`tests.sweep.test_spec.BAD`: the CLI's one line;
- :func:`~simlab.sweep.spec_parse.parse_spec` on the checks that depend on the sampler or cross parts of
  a spec (``n_trials``, distributions, reserved names, variants, the baseline): the error's text;
- opening a sweep (:func:`~simlab.sweep.runner.open_sweep`, :func:`~simlab.sweep.runner.validate`):
  a bad ``--heartbeat`` or ``workers``, probes that clash, and a changed spec under a study's name, on a
  journal file and on a SQLite database.

A change to a line here changes what users read: make it on purpose and re-record
(``python -m tests.sweep.test_error_texts``). ``{dir}`` stands for the test's folder.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from simlab.errors import SpecError
from simlab.sweep import parse_spec
from tests.stores import TOY, Stores, run_cli, write_spec
from tests.sweep.test_spec import BAD
from tests.test_bad_input import CLASH

RANGE = {"type": "float", "low": 0.1, "high": 0.2}
TPE = {"sampler": "tpe", "n_trials": 2, "seeds": [0], "objective": {"metric": "m"}}
GRID = {"seeds": [0], "objective": {"metric": "m"}, "space": {"train.lr": [0.1]}}


def _tpe_range(**dist: Any) -> dict[str, Any]:
    return {**TPE, "space": {"train.lr": {**RANGE, **dist}}}


PARSE: dict[str, dict[str, Any]] = {
    "tpe without n_trials": {k: v for k, v in _tpe_range().items() if k != "n_trials"},
    "grid with n_trials": {**GRID, "n_trials": 3},
    "unknown sampler": {**GRID, "sampler": "random"},
    "baseline of a tpe sweep": {**_tpe_range(), "baseline": "lr=0.1"},
    "space.seed": {**GRID, "space": {"seed": [0, 1]}},
    "space.variant": {**GRID, "space": {"variant": ["a"]}},
    "neither list nor table": {**GRID, "space": {"train.lr": 0.1}},
    "grid value twice": {**GRID, "space": {"train.lr": [0.1, 0.1]}},
    "empty space": {**GRID, "space": {}},
    "preset in base": {**GRID, "base": {"preset": "x"}},
    "a [base.overrides] table": {**GRID, "base": {"overrides": {"train.steps": 2}}},
    "recipe in a variant": {**GRID, "variants": [{"name": "a", "set": {"recipe": "supo"}}]},
    "recipe swept": {**GRID, "space": {"recipe": ["supo", "grpo"]}},
    "seed in base": {**GRID, "base": {"seed": 1}},
    "variant sets seed": {**GRID, "variants": [{"name": "a", "set": {"seed": 1}}]},
    "variant sets a swept key": {**GRID, "variants": [{"name": "a", "set": {"train.lr": 0.3}}]},
    "variant named twice": {**GRID, "space": {}, "variants": [{"name": "a"}, {"name": "a"}]},
    "choices on a range": _tpe_range(choices=[1]),
    "int range, float low": _tpe_range(type="int", low=0.5, high=3),
    "high not above low": _tpe_range(high=0.1),
    "log with low 0": _tpe_range(low=0.0, log=True),
    "step with log": _tpe_range(log=True, step=0.01),
    "categorical with low": {**TPE, "space": {"train.lr": {"type": "categorical", "low": 1, "choices": [1]}}},
    "categorical without choices": {**TPE, "space": {"train.lr": {"type": "categorical"}}},
    "categorical choice twice": {**TPE, "space": {"train.lr": {"type": "categorical", "choices": [1, 1]}}},
    "unknown distribution": {**TPE, "space": {"train.lr": {"type": "normal"}}},
    "unknown estimator choice": {
        **TPE, "space": {"train.estimator": {"type": "categorical", "choices": ["grpo"]}}},
}

SPEC_LINES = {
    "preset as its own key": "error: `base.preset` is not a config key path; write `task.preset` (a spec spells each "
                             "setting as --set does)",
    "a [base.overrides] table": "error: `base.overrides.train.steps` is not a config key path; `[base.overrides]` is "
                                "now `[base]`: write `train.steps` there",
    "unknown key path": "error: `train.lrr` is not a setting; choose one of ['train.estimator', 'train.lr', "
                        "'train.normaliser', 'train.overlong_mask', 'train.step_seconds', 'train.steps'] (in the "
                        "configuration train.steps=3, train.lrr=0.1, train.estimator='rollout_group')",
    "wrong type in config": "error: `train.lr='fast'` is invalid; choose a number > 0 (in the configuration "
                            "train.steps=3, train.lr='fast', train.estimator='rollout_group')",
    "wrong type in spec": "error: `seeds='0'` is invalid; give a non-empty list, each item: an integer >= 0 "
                          "(at most 2**32 - 1)",
    "empty grid": "error: `space.train.lr=[]` is invalid; give at least one value: finite numbers, strings, "
                  "booleans or lists of them",
    "unknown estimator": "error: `space.train.estimator=['rollout_group', 'grpo']` is invalid; choose one of "
                         "'rollout_group', 'trajectory_group', 'gae_concat', 'gae_segment_local', 'gae_compaction'",
    "unknown normaliser": "error: `base.train.normaliser='mean'` is invalid; choose one of 'token', "
                          "'segment', 'segment_sum', 'rollout', 'rollout_rows', 'constant' (aliases: "
                          "'token-mean' -> 'token', "
                          "'seq-mean-token-mean' -> 'segment', 'seq-mean-token-sum' -> 'segment_sum', "
                          "'seq-mean-token-sum-norm' -> 'constant')",
    "duplicate seeds": "error: `seeds=[0, 1, 0]` is invalid; list each seed once (repeated: [0])",
    "unknown spec key": "error: `objective.sampler_kind` is not a spec key; choose one of ['metric', 'direction']",
    "distribution on grid": "error: `space.train.lr={'high': 0.2, 'low': 0.1, 'type': 'float'}` is invalid; "
                            "sampler 'grid' needs a list of values; use sampler = 'tpe' for distributions",
    "objective missing": "error: `objective` is required; give it a value",
    "bad direction": "error: `objective.direction='up'` is invalid; choose one of 'maximize', 'minimize'",
    "not TOML": "error: `sweep spec='{dir}/spec.toml'` is invalid; it is not valid TOML: Invalid value (at end of "
                "document)",
    "baseline not a variant": "error: `baseline='train.estimator=grpo,train.lr=0.1'` is invalid; choose one of the "
                              "grid's variants: 'train.estimator=rollout_group,train.lr=0.1', "
                              "'train.estimator=gae_concat,train.lr=0.1', "
                              "'train.estimator=rollout_group,train.lr=0.2', "
                              "'train.estimator=gae_concat,train.lr=0.2'",
    "baseline with leaf keys": "error: `baseline='estimator=gae_concat,lr=0.2'` is invalid; write "
                               "'train.estimator=gae_concat,train.lr=0.2' (a label spells each setting by its key "
                               "path, as --set does)",
}

PARSE_LINES: dict[str, str] = {
    'tpe without n_trials': "`n_trials=None` is invalid; sampler 'tpe' needs an integer in [1, 2147483647]",
    'grid with n_trials': "`n_trials=3` is invalid; sampler 'grid' runs every cell x seed; remove n_trials",
    'unknown sampler': "`sampler='random'` is invalid; choose one of 'grid', 'tpe'",
    'baseline of a tpe sweep': (
        "`baseline='lr=0.1'` is invalid; a baseline needs `sampler = 'grid'` (a tpe sweep has no fixed cells)"
    ),
    'space.seed': '`space.seed` is reserved; list seeds under `seeds` and bundles under `[[variants]]`',
    'space.variant': '`space.variant` is reserved; list seeds under `seeds` and bundles under `[[variants]]`',
    'neither list nor table': (
        '`space.train.lr=0.1` is invalid; give a list of values (grid) or a table {type = '
        "'float'|'int'|'categorical', ...}"
    ),
    'grid value twice': '`space.train.lr=[0.1, 0.1]` is invalid; list each grid value once',
    'empty space': '`space` is empty and there are no `[[variants]]`; sweep at least one key',
    'preset in base': '`base.preset` is not a config key path; write `task.preset` (a spec spells each setting as '
                      '--set does)',
    'a [base.overrides] table': '`base.overrides.train.steps` is not a config key path; `[base.overrides]` is now '
                                '`[base]`: write `train.steps` there',
    'recipe in a variant': '`variants[0].set.recipe` is not a config key path; write `train.recipe` (a spec spells '
                           'each setting as --set does)',
    'recipe swept': '`space.recipe` is not a config key path; write `train.recipe` (a spec spells each setting as '
                    '--set does)',
    'seed in base': '`base.seed` is reserved; seeds go under `seeds`',
    'variant sets seed': '`variants[0].set.seed` is reserved; seeds go under `seeds`',
    'variant sets a swept key': '`variants[0].set.train.lr` is also swept in `space.train.lr`; keep it in one place',
    'variant named twice': "`variants[1].name='a'` is invalid; give each variant a distinct name",
    'choices on a range': '`space.train.lr.choices=[1]` is invalid; a float range takes low, high, log and step',
    'int range, float low': '`space.train.lr.low=0.5` is invalid; give an integer',
    'high not above low': '`space.train.lr.high=0.1` is invalid; give a finite number greater than low=0.1',
    'log with low 0': '`space.train.lr.low=0.0` is invalid; a log-scale range needs low > 0',
    'step with log': '`space.train.lr.step=0.01` is invalid; give a finite number > 0, and no step with log = true',
    'categorical with low': '`space.train.lr.low=1` is invalid; a categorical takes only choices',
    'categorical without choices': (
        '`space.train.lr.choices=[]` is invalid; give a non-empty list of numbers, strings or booleans'
    ),
    'categorical choice twice': '`space.train.lr.choices=[1, 1]` is invalid; list each choice once',
    'unknown distribution': "`space.train.lr.type='normal'` is invalid; choose one of 'float', 'int', 'categorical'",
    'unknown estimator choice': (
        "`space.train.estimator.choices='grpo'` is invalid; choose one of 'rollout_group', 'trajectory_group', "
        "'gae_concat', 'gae_segment_local', 'gae_compaction'"
    ),
}

OPEN_LINES: dict[str, str] = {
    'heartbeat 0': '`--heartbeat=0` is invalid; choose an integer number of seconds in [1, 86400]',
    'workers 0': '`workers=0` is invalid; choose an integer in [1, 1024]',
    'tpe probes that clash': (
        "`harness.t_comp=60` is invalid; the trigger limit -12 tokens cannot hold the prompt, a summary and one step "
        "(21 tokens); choose an integer <= 27 (in the configuration train.recipe='compactionrl', "
        'harness.window=48, harness.t_comp=60)'
    ),
    'changed spec, journal': (
        "study 'same' in {dir}/journal.log was made from a different spec; give this sweep a new `name` or another "
        '--storage (resuming it would mix two sweeps)'
    ),
    'changed spec, sqlite': (
        "study 'same' in sqlite:///{dir}/o.db was made from a different spec; give this sweep a new `name` or "
        'another --storage (resuming it would mix two sweeps)'
    ),
}


def cli_line(folder: Path, text: str) -> str:
    """``simlab sweep`` on ``text`` with the toy backend: its output, the folder shown as ``{dir}``."""
    store = folder / "store"
    store.mkdir(exist_ok=True)
    stores = Stores(store, f"sqlite:///{store / 'mlflow.db'}", store / "journal.log")
    result = run_cli(["sweep", str(write_spec(folder, text)), *stores.args()])
    assert result.exit_code == 2, result.output
    return result.output.strip().replace(str(folder), "{dir}")


def parse_line(raw: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as err:
        parse_spec(raw)
    return str(err.value)


def _refused(call: Any, folder: Path) -> str:
    with pytest.raises(SpecError) as err:
        call()
    return str(err.value).replace(str(folder), "{dir}")


def open_lines(folder: Path, tracking_uri: str) -> dict[str, str]:
    """The refusals of opening a sweep, the folder shown as ``{dir}``."""
    from simlab.sweep.backend import SIMLAB
    from simlab.sweep.runner import open_sweep, run_sweep, validate

    toy = 'name = "same"\nseeds = [0]\n[space]\ntrain.lr = [{lr}]\n[objective]\nmetric = "eval/compacted_success"\n'
    spec, changed = (parse_spec(tomllib.loads(toy.format(lr=lr))) for lr in (0.1, 0.2))
    clash = parse_spec(tomllib.loads(CLASH.format(low=48, high=60)))  # window 48 and t_comp 60 only together
    lines = {
        "heartbeat 0": _refused(lambda: open_sweep(spec, heartbeat=0, root=folder), folder),
        "workers 0": _refused(lambda: run_sweep(spec, workers=0, root=folder), folder),
        "tpe probes that clash": _refused(lambda: validate(clash, SIMLAB), folder),
    }
    for kind, location in (("journal", str(folder / "journal.log")), ("sqlite", f"sqlite:///{folder / 'o.db'}")):
        open_sweep(spec, storage=location, tracking_uri=tracking_uri, root=folder, backend=TOY)
        lines[f"changed spec, {kind}"] = _refused(
            lambda loc=location: open_sweep(changed, storage=loc, tracking_uri=tracking_uri, root=folder,
                                            backend=TOY), folder)
    return lines


@pytest.mark.parametrize("case", sorted(SPEC_LINES))
def test_a_bad_spec_gets_its_line(tmp_path: Path, case: str) -> None:
    text = {c: t for c, t, _ in BAD}[case]
    assert cli_line(tmp_path, text) == SPEC_LINES[case]


def test_every_bad_spec_is_pinned() -> None:
    assert sorted(SPEC_LINES) == sorted(c for c, _, _ in BAD)
    assert sorted(PARSE_LINES) == sorted(PARSE)


@pytest.mark.parametrize("case", sorted(PARSE))
def test_a_spec_check_says_what_it_said(case: str) -> None:
    assert parse_line(PARSE[case]) == PARSE_LINES[case]


def test_opening_a_sweep_refuses_as_it_did(ready_stores: Stores, tmp_path: Path) -> None:
    assert open_lines(tmp_path, ready_stores.tracking_uri) == OPEN_LINES


def _record() -> None:  # pragma: no cover - run by hand to re-record
    import tempfile

    from tests.stores import _template_db

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        print("SPEC_LINES = {")
        for i, (case, text, _) in enumerate(BAD):
            sub = folder / str(i)
            sub.mkdir(exist_ok=True)
            print(f"    {case!r}: {cli_line(sub, text)!r},")
        print("}\nPARSE_LINES = {")
        for case, raw in PARSE.items():
            print(f"    {case!r}: {parse_line(raw)!r},")
        print("}\nOPEN_LINES = {")
        import shutil

        shutil.copy(_template_db(), folder / "mlflow.db")
        for case, line in open_lines(folder, f"sqlite:///{folder / 'mlflow.db'}").items():
            print(f"    {case!r}: {line!r},")
        print("}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_record())
