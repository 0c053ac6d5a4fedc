"""The input layer's edges (simlab.rules): what a review of the pydantic move found, pinned.

Each case is a value a user or a caller can give; each bad one must be one ``ConfigError`` line naming
the key, never another exception (the command line reads any other exception as a bug).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simlab.analysis.audit.data import load_published
from simlab.analysis.replication.spec import parse_rows
from simlab.config import RunConfig, resolve
from simlab.credit.kernels import scale_rows
from simlab.errors import ConfigError, FindingsError, SpecError
from simlab.harness.config import HarnessConfig
from simlab.rules import check_value, ints
from simlab.segments import tokens_after
from simlab.sweep.spec_parse import parse_spec

GOOD = {"seeds": [0], "space": {"train.lr": [0.1]}, "objective": {"metric": "m"}}
TPE = {**GOOD, "sampler": "tpe", "n_trials": 2}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({**GOOD, "variants": [{"name": "a", "settings": {"train.lr": 0.2}}]},
         "`variants[0].settings` is not a spec key"),
        ({**GOOD, "pruner": {"kind": "median"}}, "`pruner.kind` is not a spec key"),
    ],
    ids=["variant-settings", "pruner-kind"],
)
def test_a_spec_table_takes_its_documented_keys_only(spec: dict[str, Any], message: str) -> None:
    # the attribute behind an alias (Variant.settings for `set`, PrunerSpec.kind for `type`) is not a key
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_spec(spec)


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (lambda: parse_spec({**TPE, "space": {"x": {"type": "float", "low": "a", "high": 2}}}),
         "`space.x.low='a'` is invalid; choose a finite number"),
        (lambda: parse_spec({**TPE, "space": {"x": {"type": "float", "low": 1, "high": 2, "step": "a"}}}),
         "`space.x.step='a'` is invalid; choose a finite number, or leave it unset"),
        (lambda: resolve({"train": {"alpha": "a"}}), "`train.alpha='a'` is invalid; choose a finite value > 0, "
                                                      "or leave it unset"),
    ],
    ids=["unbounded", "optional-unbounded", "optional-bounded"],
)
def test_what_a_real_allows_reads_plainly(call: Any, text: str) -> None:
    with pytest.raises(ConfigError) as err:
        call()
    assert str(err.value) == text


def test_an_integer_no_float_holds_is_refused_by_its_key() -> None:
    with pytest.raises(ConfigError, match=r"`train.lr=1000.*` is invalid; choose a number a float holds"):
        resolve({"train": {"lr": 10**400}})
    with pytest.raises(SpecError, match=r"`space.x.high=1000.*` is invalid; choose a number a float holds"):
        parse_spec({**TPE, "space": {"x": {"type": "float", "low": 1, "high": 10**400}}})


def test_a_findings_row_lists_only_the_keys_a_file_may_give(tmp_path: Path) -> None:
    spec = tmp_path / "toy.toml"
    spec.write_text('[[findings]]\nid = "1"\ncolour = 1\n', encoding="utf-8")
    with pytest.raises(FindingsError, match=r"`findings\[0\].colour` is not a findings key") as err:
        parse_rows(spec)
    assert "'spec'" not in str(err.value) and "spec_path" not in str(err.value)
    for given in ('[[findings]]\nid = "1"\nspec = "other"\n', "findings = [1]\n"):
        spec.write_text(given, encoding="utf-8")
        with pytest.raises(FindingsError) as err:
            parse_rows(spec)
        assert "spec_path" not in str(err.value), str(err.value)


def test_paper_metadata_may_hold_more_than_strings(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[1] / "analysis" / "published.toml").read_text(encoding="utf-8")
    first = text.index("[papers.")
    path = tmp_path / "published.toml"
    head = text.index("\n", first) + 1
    path.write_text(text[:head] + "year = 2025\nauthors = [\"A\", \"B\"]\n" + text[head:], encoding="utf-8")
    load_published(path)


def test_a_section_is_checked_as_a_section() -> None:
    cfg = resolve({})
    RunConfig.check_fields({"task": cfg.task, "harness": cfg.harness})
    with pytest.raises(ConfigError, match=r"`task=\{'vocab_size': 3\}` is invalid; give a TaskConfig"):
        cfg.replace(task={"vocab_size": 3})


def test_numpy_numbers_are_read_as_the_numbers_they_hold() -> None:
    assert type(HarnessConfig(window=np.int64(64)).window) is int  # type: ignore[arg-type]
    assert type(resolve({"seed": np.int64(3)}).seed) is int
    assert check_value("n", np.int64(5), ints(1)) == 5
    with pytest.raises(ConfigError, match=r"`harness.window=4` is invalid"):
        HarnessConfig(window=np.int64(4))  # type: ignore[arg-type]


def test_ints_is_one_annotation_per_range() -> None:
    assert ints(1) is ints(1) and ints(1, 64) is not ints(1)


def test_a_compiled_loop_takes_keywords() -> None:
    grid = np.ones((2, 3))
    scale_rows(grid=grid, seg_tokens=np.array([1, 3]), per_row=np.array([2.0, 3.0]))
    assert grid.tolist() == [[2.0, 1.0, 1.0], [3.0, 3.0, 3.0]]


def _tokens_after_loop(seg_tokens: np.ndarray, seg_rollout: np.ndarray) -> list[int]:
    """N_after by the definition: walk the rows backwards, restarting the count when the rollout changes."""
    out, running, current = [0] * seg_tokens.size, 0, -2
    for s in range(seg_tokens.size - 1, -1, -1):
        if seg_rollout[s] < 0:
            continue
        if seg_rollout[s] != current:
            current, running = seg_rollout[s], 0
        out[s], running = running, running + int(seg_tokens[s])
    return out


def test_tokens_after_counts_the_later_rows_of_each_rollout() -> None:
    assert tokens_after(np.array([3, 4, 5]), np.array([0, 0, 1])).tolist() == [4, 0, 0]
    assert tokens_after(np.array([2, 9, 3]), np.array([0, -1, 0])).tolist() == [3, 0, 0]  # a dummy between
    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(0, 12))
        tokens, rollout = rng.integers(0, 9, n), np.sort(rng.integers(0, 4, n))
        rollout[rng.random(n) < 0.2] = -1  # dummies anywhere, even inside a rollout's rows
        assert tokens_after(tokens, rollout).tolist() == _tokens_after_loop(tokens, rollout)


def test_a_huge_bad_value_is_shown_shortened_and_kept_whole() -> None:
    with pytest.raises(ConfigError) as err:
        resolve({"train": {"lr": 10**400}})
    message = str(err.value)
    assert len(message) < 200 and "..." in message and err.value.value == 10**400
    with pytest.raises(SpecError) as spec_err:
        parse_spec({**GOOD, "seeds": [*range(1000), 0]})
    assert len(str(spec_err.value)) < 300 and "repeated: [0]" in str(spec_err.value)



def test_what_a_refusal_says_a_field_allows_is_read_from_the_run_configs_json_schema() -> None:
    """One source for every field's text: pydantic's JSON schema of the whole run config (its ``$defs`` hold
    each section's) says what each field allows exactly as a refusal of that field does."""
    from simlab.refusals import json_schema, says

    assert json_schema(RunConfig)[0]["properties"]["harness"] == {"x-simlab-allowed": "give a HarnessConfig",
                                                                   "title": "Harness"}  # a section, not a table
    defs = RunConfig.model_json_schema()["$defs"]
    read = 0
    for info in RunConfig.model_fields.values():
        section = info.annotation
        if section is None or section.__name__ not in defs:
            continue
        for name, field in defs[section.__name__]["properties"].items():
            assert says(field, defs) == says(*json_schema(section.allows(name))), (section.__name__, name)
            read += 1
    assert read > 60
    window = defs["HarnessConfig"]["properties"]["window"]
    assert (window["minimum"], window["maximum"]) == (8, 2**16)
    assert says(window, defs) == "choose an integer >= 8 (at most 2**16)"
