"""Every class of bad input issue 12 lists, and its neighbours: one line naming the key, the bad value and
what is allowed; exit code 2; nothing written.

The key lists are made from the sections themselves (every name-valued key, every integer key, every
float key), so a setting added later is covered without editing this file.
"""

from __future__ import annotations

import math
import re
import socket
import subprocess
import sys
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from typer.testing import CliRunner

from simlab.cli import app
from simlab.config import BaseConfig, EvalConfig, TrainConfig, resolve
from simlab.errors import ConfigError
from simlab.harness.config import HarnessConfig
from simlab.policy.config import PolicyConfig
from simlab.rules import ExistingFile
from simlab.schema import Section
from simlab.tasks.config import KeyRecallConfig, PeekReadConfig, PointerChaseConfig

SECTIONS: list[type[Section]] = [HarnessConfig, PolicyConfig, TrainConfig, BaseConfig, EvalConfig]
TASKS = {"keyrecall-tiny": KeyRecallConfig, "pointerchase-tiny": PointerChaseConfig, "peekread-pos": PeekReadConfig}


def _kinds(tp: Any) -> set[str]:
    """What a field's annotation takes, read from its types (not its bounds): ``int``, ``real``,
    ``name`` (a string or a literal), ``flag``, ``path`` (a file's)."""
    while get_origin(tp) is Annotated:
        if any(isinstance(m, ExistingFile) for m in get_args(tp)[1:]):
            return {"path"}
        tp = get_args(tp)[0]
    if get_origin(tp) in (Union, types.UnionType):
        args = set(get_args(tp)) - {type(None)}
        return {"real"} if args == {int, float} else set().union(*(_kinds(a) for a in args))
    if tp is int:
        return {"int"}
    if tp is str or get_origin(tp) is Literal:
        return {"name"}
    return {"flag"} if tp is bool else set()


def _keys(kind: str) -> list[tuple[str, str | None, str]]:
    """(section, task preset or None, field) of every user-settable field that takes a ``kind`` value;
    a task field is listed once, with a preset whose task has it."""
    out: list[tuple[str, str | None, str]] = []
    for cls in SECTIONS:
        for name in cls.field_names():
            if kind in _kinds(cls.allows(name)) and (cls, name) != (PolicyConfig, "vocab_size"):
                out.append((cls.SECTION, None, name))  # policy.vocab_size is set by the task (tested below)
    seen: set[str] = set()
    for preset, task in TASKS.items():
        for name in task.field_names():
            if name not in seen and kind in _kinds(task.allows(name)):
                seen.add(name)
                out.append(("task", preset, name))
    return out


def _resolve_one(section: str, preset: str | None, name: str, value: Any) -> ConfigError:
    nested: dict[str, Any] = {section: {name: value}}
    if preset is not None:
        nested["task"]["preset"] = preset
    with pytest.raises(ConfigError) as err:
        resolve(nested)
    return err.value


def _one_line(message: str, key: str) -> None:
    assert "\n" not in message and f"`{key}" in message and "is invalid" in message, message


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed command, as a user runs it (a fresh process: nothing cached, real exit codes)."""
    return subprocess.run([sys.executable, "-m", "simlab.cli", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=env)


def _fails_cleanly(out: subprocess.CompletedProcess[str] | Any, *words: str) -> None:
    text = getattr(out, "stderr", None) or out.output
    code = getattr(out, "returncode", None)
    code = out.exit_code if code is None else code
    assert code == 2, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    for word in words:
        assert word in lines[0], (word, lines[0])


# -------------------------------------------------------------- 1. a list or table where a name is expected
NAME_KEYS = _keys("name")


def test_every_name_valued_key_is_covered() -> None:
    keys = {f"{s}.{n}" for s, _, n in NAME_KEYS}
    assert {"harness.trigger", "harness.summariser", "harness.v_sum", "train.recipe", "train.algorithm",
            "train.estimator", "train.normaliser", "train.lam", "train.critic", "base.teacher", "base.seed",
            "eval.seed"} <= keys


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}, ["supo"]], ids=["list", "table", "list-of-a-name"])
@pytest.mark.parametrize(("section", "preset", "name"), NAME_KEYS, ids=[f"{s}.{n}" for s, _, n in NAME_KEYS])
def test_a_list_or_table_where_a_name_is_expected(section: str, preset: str | None, name: str, value: Any) -> None:
    err = _resolve_one(section, preset, name, value)
    _one_line(str(err), f"{section}.{name}")
    assert err.key == f"{section}.{name}" and err.value == value and "choose" in err.allowed


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}])
@pytest.mark.parametrize("key", ["task.preset", "device"])
def test_a_list_or_table_for_the_preset_and_the_device(key: str, value: Any) -> None:
    section, _, name = key.rpartition(".")
    nested: dict[str, Any] = {section: {name: value}} if section else {name: value}
    with pytest.raises(ConfigError, match=rf"`{key}=.*` is invalid; choose one of"):
        resolve(nested)


def test_a_list_as_the_preset_on_the_command_line(tmp_path: Path) -> None:
    out = run("train", "--set", "task.preset=[1,2]", "--out", str(tmp_path / "run"), "--store", str(tmp_path / "s"))
    _fails_cleanly(out, "`task.preset=[1, 2]` is invalid; choose one of 'keyrecall-tiny'")
    assert list(tmp_path.iterdir()) == []


def test_a_list_as_a_spec_name() -> None:
    from simlab.sweep import SpecError, parse_spec

    good = {"seeds": [0], "space": {"train.lr": [0.1]}, "objective": {"metric": "m"}}
    for key, value, where in [("name", ["a"], "name"), ("sampler", ["grid"], "sampler")]:
        with pytest.raises(SpecError, match=rf"`{where}=\['.*'\]` is invalid"):
            parse_spec({**good, key: value})
    with pytest.raises(SpecError, match=r"`objective.metric=\['m'\]` is invalid"):
        parse_spec({**good, "objective": {"metric": ["m"]}})
    with pytest.raises(SpecError, match=r"`base.preset` is not a config key path; write `task.preset`"):
        parse_spec({**good, "base": {"preset": ["x"]}})


# ------------------------------------------------------------------ 2. an integer too large for torch
INT_KEYS = _keys("int")


@pytest.mark.parametrize("value", [2**64, 10**30])
@pytest.mark.parametrize(("section", "preset", "name"), INT_KEYS, ids=[f"{s}.{n}" for s, _, n in INT_KEYS])
def test_an_integer_too_large_for_torch(section: str, preset: str | None, name: str, value: int) -> None:
    err = _resolve_one(section, preset, name, value)
    _one_line(str(err), f"{section}.{name}")
    assert err.key is not None and err.key.startswith(f"{section}.{name}")
    assert "choose an integer" in err.allowed or "pair of integers" in err.allowed, err.allowed


@pytest.mark.parametrize("key", ["seed", "base.seed", "eval.seed"])
def test_every_seed_has_an_upper_bound(key: str) -> None:
    section, _, name = key.rpartition(".")
    nested: dict[str, Any] = {section: {name: 2**32}} if section else {name: 2**32}
    with pytest.raises(ConfigError, match=rf"`{key}=4294967296` is invalid; choose an integer .*2\*\*32 - 1"):
        resolve(nested)


def test_the_largest_seed_runs(tmp_path: Path) -> None:
    # the bound is what torch, numpy and the tasks take: a run at it gets through evaluation
    from simlab.sinks import JsonlSink
    from simlab.train import train
    from tests.trainer.conftest import tiny

    nested = tiny(base={"steps": 0}, train={"steps": 0}, eval={"seed": "run", "episodes": 4})
    cfg = resolve({**nested, "seed": 2**32 - 1})
    final = train(cfg, JsonlSink(tmp_path / "run"), store=tmp_path)
    assert 0.0 <= final["eval/compacted/success"] <= 1.0


def test_a_huge_integer_on_the_command_line_writes_nothing(tmp_path: Path) -> None:
    for setting, key in [("seed=99999999999999999999999", "seed"), ("harness.window=99999999999", "harness.window"),
                         ("train.prompts=4294967296", "train.prompts")]:
        out = run("train", "--set", setting, "--out", str(tmp_path / "run"), "--store", str(tmp_path / "s"))
        _fails_cleanly(out, f"`{key}=")
    assert list(tmp_path.iterdir()) == []


def test_rollouts_per_step_are_bounded() -> None:
    with pytest.raises(ConfigError, match=r"`train.prompts=65536` is invalid; prompts x group_size"):
        resolve({"train": {"prompts": 2**16, "group_size": 2**5}})


# ---------------------------------------------------------------------- 3. a folder where a file is expected
@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "folder.toml").mkdir()
    (tmp_path / "file").write_text("x\n")
    (tmp_path / "binary.toml").write_bytes(bytes(range(256)))
    return {"folder": tmp_path / "folder.toml", "file": tmp_path / "file", "binary": tmp_path / "binary.toml",
            "root": tmp_path}


def _unchanged(places: dict[str, Path]) -> None:
    assert sorted(p.name for p in places["root"].iterdir()) == ["binary.toml", "file", "folder.toml"]
    assert list(places["folder"].iterdir()) == []


def test_train_config_is_a_folder(places: dict[str, Path]) -> None:
    out = run("train", str(places["folder"]), "--store", str(places["root"] / "s"))
    _fails_cleanly(out, "`config file=", "it is a folder; give a TOML file")
    _unchanged(places)


def test_train_config_is_binary(places: dict[str, Path]) -> None:
    out = run("train", str(places["binary"]), "--store", str(places["root"] / "s"))
    _fails_cleanly(out, "`config file=", "not UTF-8 text")
    _unchanged(places)


@pytest.mark.parametrize(("option", "where"), [("--out", "file"), ("--store", "file"), ("--out", "below-a-file")])
def test_train_folder_options_given_a_file(places: dict[str, Path], option: str, where: str) -> None:
    target = places["file"] if where == "file" else places["file"] / "run"
    other = "--store" if option == "--out" else "--out"
    out = run("train", option, str(target), other, str(places["root"] / "other"))
    _fails_cleanly(out, f"`{option}=", "is a file")
    _unchanged(places)
    assert places["file"].read_text() == "x\n"


def test_an_existing_run_folder_is_never_overwritten(places: dict[str, Path]) -> None:
    run_dir = places["root"] / "run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text("{}\n")
    out = run("train", "--out", str(run_dir), "--store", str(places["root"] / "s"))
    _fails_cleanly(out, "`--out=", "not empty")
    assert (run_dir / "metrics.jsonl").read_text() == "{}\n" and not (places["root"] / "s").exists()


def test_summariser_checkpoint_is_a_folder(places: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match=r"`train.summariser_checkpoint=.*` is invalid; .* is a folder"):
        resolve({"train": {"summariser_checkpoint": str(places["folder"])}})
    with pytest.raises(ConfigError, match=r"`train.summariser_checkpoint=.*` is invalid; no such checkpoint file"):
        resolve({"train": {"summariser_checkpoint": str(places["root"] / "absent.pt")}})


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["sweep", "{folder}"], ["`sweep spec=", "it is a folder"]),
        (["sweep", "{binary}"], ["`sweep spec=", "not UTF-8 text"]),
        (["sweep", "quick", "--storage", "{folder}"], ["`--storage=", "is a folder"]),
        (["sweep", "quick", "--tracking-uri", "sqlite:///{folder}"], ["`--tracking-uri=", "is a folder"]),
        (["sweep", "quick", "--storage", "{file}/journal.log"], ["`--storage=", "is a file"]),
        (["audit", "--out", "{file}"], ["`--out=", "choose an existing folder"]),
        (["audit", "--data", "{folder}"], ["`--data=", "it is a folder"]),
        (["audit", "--data", "{binary}"], ["`--data=", "not UTF-8 text"]),
        (["report", "x", "--out", "{file}"], ["`--out=", "choose an existing folder"]),
        (["findings", "--specs", "{file}"], ["`--specs=", "choose an existing folder"]),
        (["findings", "--source", "exports", "--specs", "{root}"], ["`findings spec=", "not UTF-8 text"]),
    ],
)
def test_path_options_given_the_wrong_kind(places: dict[str, Path], args: list[str], words: list[str]) -> None:
    filled = [a.format(**{k: str(v) for k, v in places.items()}) for a in args]
    out = run(*filled, cwd=places["root"])
    _fails_cleanly(out, *words)
    _unchanged(places)


def test_simlab_home_is_a_file(places: dict[str, Path]) -> None:
    import os

    env = {**os.environ, "SIMLAB_HOME": str(places["file"])}
    out = run("sweep", "quick", cwd=places["root"], env=env)
    _fails_cleanly(out, "`SIMLAB_HOME=", "it is a file")
    _unchanged(places)


# ------------------------------------------------------------------------------------------- 4. the UI
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--host", "no.such.host.invalid"], ["`--host='no.such.host.invalid'` is invalid", "does not resolve"]),
        (["--host", "10.255.255.1"], ["`--host='10.255.255.1'` is invalid", "cannot listen there"]),
        (["--host", ""], ["`--host=''` is invalid"]),
        (["--workers", "0"], ["`--workers=0` is invalid; choose an integer in [1, 64]"]),
        (["--workers", "-3"], ["`--workers=-3` is invalid"]),
        (["--port", "0"], ["`--port=0` is invalid; choose an integer in [1, 65535]"]),
    ],
)
def test_ui_bad_options_exit_2_before_any_server(tmp_path: Path, args: list[str], words: list[str]) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = CliRunner().invoke(app, ["ui", "--port", "5999", "--tracking-uri", uri, *args])
    _fails_cleanly(result, *words)
    assert list(tmp_path.iterdir()) == []


def test_ui_on_ipv6_loopback_is_understood(tmp_path: Path) -> None:
    # ::1 resolves as IPv6 (the check used to open an IPv4 socket and crash): a port in use there is named
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("::1", 0))
        except OSError:
            pytest.skip("no IPv6 loopback on this machine")
        sock.listen()
        port = sock.getsockname()[1]
        uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
        result = CliRunner().invoke(app, ["ui", "--host", "::1", "--port", str(port), "--tracking-uri", uri])
    _fails_cleanly(result, f"`--port={port}` is invalid; something already listens on ::1:{port}")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- 5. inf and NaN for a float
FLOAT_KEYS = _keys("real")


def test_every_float_key_is_covered() -> None:
    keys = {f"{s}.{n}" for s, _, n in FLOAT_KEYS}
    assert {"train.lr", "train.gamma", "train.lam", "train.alpha", "harness.frac", "harness.summariser_quality",
            "base.quality", "policy.dropout", "task.noise", "task.read_payoff"} <= keys


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize(("section", "preset", "name"), FLOAT_KEYS, ids=[f"{s}.{n}" for s, _, n in FLOAT_KEYS])
def test_inf_and_nan_for_every_float(section: str, preset: str | None, name: str, value: float) -> None:
    err = _resolve_one(section, preset, name, value)
    _one_line(str(err), f"{section}.{name}")
    assert err.key == f"{section}.{name}"


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "+inf"])
def test_inf_and_nan_on_the_command_line(tmp_path: Path, text: str) -> None:
    out = run("train", "--set", f"train.lr={text}", "--out", str(tmp_path / "run"), "--store", str(tmp_path / "s"))
    _fails_cleanly(out, "`train.lr=", "choose a finite value > 0")
    assert list(tmp_path.iterdir()) == []


def test_inf_in_inspect_options() -> None:
    result = CliRunner().invoke(app, ["inspect", "--task", "keyrecall-tiny", "--episodes", "8", "--frac", "inf"])
    _fails_cleanly(result, "`harness.frac=inf` is invalid")
    result = CliRunner().invoke(app, ["inspect", "--task", "keyrecall-tiny", "--episodes", "8", "--quality", "nan"])
    _fails_cleanly(result, "`agent.quality=nan` is invalid")


# ------------------------------------------------------ 6. a tpe spec whose axes only clash together
CLASH = """
sampler = "tpe"
n_trials = 2
seeds = [0]
[base]
train.recipe = "compactionrl"
[space]
harness.window = {{ type = "int", low = {low}, high = 128 }}
harness.t_comp = {{ type = "int", low = 8, high = {high} }}
[objective]
metric = "eval/compacted/success"
"""


def _sweep(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    store = tmp_path / "store"
    return run("sweep", str(spec), "--no-progress", "--storage", str(store / "journal.log"),
               "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}", cwd=tmp_path)


def test_tpe_axes_valid_alone_but_not_together_fail_before_the_sweep(tmp_path: Path) -> None:
    # window 48 alone (t_comp = 48 // 6) and t_comp 60 alone (the preset's window 96) resolve; together not
    for settings in ({"harness": {"window": 48}}, {"harness": {"t_comp": 60}}):
        resolve({"train": {"recipe": "compactionrl"}, **settings})
    out = _sweep(tmp_path, CLASH.format(low=48, high=60))
    _fails_cleanly(out, "`harness.t_comp=60` is invalid", "in the configuration", "harness.window=48")
    assert not (tmp_path / "store").exists()


def test_tpe_int_axis_probed_at_every_value_when_few(tmp_path: Path) -> None:
    # n_head in [3, 5] with d_model 96: 3 and 4 divide it, 5 (an end) does not; [4, 6] hides nothing either
    from simlab.sweep.spec import probe_settings
    from simlab.sweep.spec_parse import parse_spec

    spec = parse_spec({"sampler": "tpe", "n_trials": 1, "seeds": [0], "objective": {"metric": "m"},
                       "space": {"policy.n_head": {"type": "int", "low": 2, "high": 7}}})
    assert [p["policy.n_head"] for p in probe_settings(spec)] == [2, 3, 4, 5, 6, 7]
    spec = parse_spec({"sampler": "tpe", "n_trials": 1, "seeds": [0], "objective": {"metric": "m"},
                       "space": {"train.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
                                 "train.estimator": {"type": "categorical",
                                                     "choices": ["rollout_group", "gae_concat"]}}})
    assert len(probe_settings(spec)) == 4  # both ends x both choices


def test_a_clash_between_a_variant_and_an_axis_fails_before_the_sweep(tmp_path: Path) -> None:
    text = CLASH.format(low=48, high=40).replace("[space]", '[[variants]]\nname = "long-tcomp"\n'
                                                 'set = { harness.t_comp = 47 }\n[[variants]]\nname = "short"\n'
                                                 'set = { harness.t_comp = 8 }\n[space]')
    text = text.replace('harness.t_comp = { type = "int", low = 8, high = 40 }\n', "")
    out = _sweep(tmp_path, text)
    _fails_cleanly(out, "`harness.t_comp=47` is invalid", "harness.window=48")
    assert not (tmp_path / "store").exists()


# ------------------------------------------------------------------- 7. errors that name the wrong key
SUPO_WINDOW_21 = ("`harness.window=21` is invalid; train.recipe='supo' derives harness.frac=0.61 from it; for "
                  "harness.frac: the trigger limit 12 tokens cannot hold the prompt, a summary and one step "
                  "(21 tokens); raise it so the limit is >= 21; change harness.window (set in your settings) or set "
                  "harness.frac yourself")


@pytest.mark.parametrize(
    ("nested", "message"),
    [
        # the window check names its least window: exact for that check
        ({"harness": {"window": 8}}, "`harness.window=8` is invalid; it cannot hold the prompt (3), a summary (7) "
         "and one step (11); choose an integer >= 21"),
        # supo derives L = frac x W from the window: the window is named, with the recipe that derived frac
        ({"harness": {"window": 21}}, SUPO_WINDOW_21),
        # grpo widens the window to L x (S + 1): a huge S is named, not the derived window
        ({"train": {"recipe": "grpo"}, "harness": {"max_compactions": 1000}},
         "`harness.max_compactions=1000` is invalid; train.recipe='grpo' derives harness.window=76076 from it; for "
         "harness.window: choose an integer >= 8 (at most 2**16); change harness.max_compactions (set in your "
         "settings) or set harness.window yourself"),
        # a long summary clashes with the preset's window: the summary length is named, with the preset
        ({"harness": {"summary_tokens": 90}},
         "`harness.summary_tokens=90` is invalid; it clashes with harness.window=96 (set by preset 'keyrecall-tiny'); "
         "for harness.window: it cannot hold the prompt (3), a summary (91) and one step (11); choose an integer "
         ">= 105; change harness.summary_tokens (set in your settings) or set harness.window yourself"),
        ({"train": {"recipe": "compactionrl"}, "harness": {"t_comp": 100}},
         "`harness.t_comp=100` is invalid; the trigger limit -4 tokens cannot hold the prompt, a summary and one step "
         "(21 tokens); choose an integer <= 75"),
    ],
)
def test_the_error_names_the_setting_the_user_gave(nested: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        resolve(nested)
    assert str(err.value) == message


def test_a_value_no_user_set_names_its_layer_and_how_to_override_it() -> None:
    """Nothing the user set is involved (a preset value breaks a rule of its own): the layer is named."""
    from simlab.settings import Layer, Settings

    settings = Settings([Layer("preset", "preset 'x'", {"harness.window": 9})])
    said = settings.blame(ConfigError.invalid("harness.window", 9, "choose an integer >= 21"))
    assert str(said) == ("`harness.window=9` is invalid; choose an integer >= 21 (harness.window is set by "
                         "preset 'x'; set it yourself to override it)")


def test_the_file_and_the_set_layers_are_named_apart(tmp_path: Path) -> None:
    from simlab.config import load

    path = tmp_path / "run.toml"
    path.write_text("[harness]\nsummary_tokens = 90\n")
    with pytest.raises(ConfigError, match=f"change harness.summary_tokens \\(set in {re.escape(str(path))}\\)"):
        load(path, [])
    said = "change harness.window (set in --set) or set harness.frac yourself"
    with pytest.raises(ConfigError, match=re.escape(said)):
        load(path, ["harness.summary_tokens=2", "harness.window=21"])


def test_the_window_checks_least_window_works_where_no_recipe_derives_from_it() -> None:
    """The bound is the window check's own: exact under a recipe that derives nothing from the window; under
    supo the next refusal names the derivation."""
    with pytest.raises(ConfigError) as err:
        resolve({"harness": {"window": 8}})
    least = int(str(err.value).rsplit(">= ", 1)[1])
    react = {"train": {"recipe": "react"}}
    assert resolve({**react, "harness": {"window": least}}).harness.window == least
    with pytest.raises(ConfigError):
        resolve({**react, "harness": {"window": least - 1}})
    with pytest.raises(ConfigError) as err:
        resolve({"harness": {"window": least}})
    assert str(err.value) == SUPO_WINDOW_21


def test_window_8_under_supo_on_the_command_line(tmp_path: Path) -> None:
    out = run("train", "--set", "harness.window=8", "--out", str(tmp_path / "run"), "--store", str(tmp_path / "s"))
    _fails_cleanly(out, "`harness.window=8` is invalid", "choose an integer >= 21")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", "-1"], "`seed=-1` is invalid; choose an integer >= 0"),
        (["--seed", "4294967296"], "`seed=4294967296` is invalid"),
        (["--episodes", "0"], "`episodes=0` is invalid"),
        (["--batch", "0"], "`batch=0` is invalid"),
        (["--group-size", "0"], "`group_size=0` is invalid"),
        (["--episodes", "12", "-G", "8"], "`episodes=12` is invalid; choose a multiple of group_size=8"),
        (["--set", "noise"], "`--set noise` is invalid; write key=value"),
        (["--set", "policy.n_layer=2"], "`--set policy.n_layer=...` is invalid"),
        (["--set", "harness.trigger=[1]"], "`harness.trigger=[1]` is invalid"),
        (["--set", "nope=1"], "`task.nope` is not a setting"),
    ],
)
def test_inspect_bad_input_names_the_option(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["inspect", "--task", "keyrecall-tiny", "--episodes", "8", *args])
    _fails_cleanly(result, message)


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["train.lr"], "`--set train.lr` is invalid; write key=value"),
        (["=3"], "`--set =3` is invalid"),
        (["train..lr=3"], "`--set train..lr=3` is invalid"),
        (["train.optim.lr=1"], "`train.optim.lr` is not a key path"),
        (["train=3"], "`train` is not a key path"),
        (["nope.lr=1"], "`nope.lr` is not a key path"),
    ],
)
def test_set_grammar_errors_name_the_item(tmp_path: Path, items: list[str], message: str) -> None:
    args = [a for item in items for a in ("--set", item)]
    out = run("train", *args, "--out", str(tmp_path / "run"), "--store", str(tmp_path / "s"))
    _fails_cleanly(out, message)
    assert list(tmp_path.iterdir()) == []


def test_policy_vocab_size_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"`policy.vocab_size=99` is invalid; it is set by the task"):
        resolve({"policy": {"vocab_size": 99}})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["eval.episodes=64", "eval.curve_episodes=65"],
         "`eval.curve_episodes=65` is invalid; it is a subset of the held-out set: choose an integer in [1, 64]"),
        (["eval.curve_episodes=0"], "`eval.curve_episodes=0` is invalid"),
    ],
)
def test_a_learning_curve_subset_outside_the_held_out_set(tmp_path: Path, settings: list[str], message: str) -> None:
    args = [a for s in settings for a in ("--set", s)]
    out = run("train", *args, "--out", str(tmp_path / "run"), "--store", str(tmp_path / "s"))
    _fails_cleanly(out, message)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------- the bounds, written by hand (not read from the rules)
BOUNDS: list[tuple[str, float, float, str]] = [
    # key, the smallest allowed value, the largest (inf: none), which ends are open ("lo", "hi", "both", "")
    ("harness.window", 8, math.inf, ""),  # room for an observation, the phase cue and a summary
    ("harness.frac", 0.0, 1.0, "lo"),  # a share of the window; 0 would compact before anything is read
    ("harness.t_comp", 1, math.inf, ""),
    ("harness.chunk_steps", 1, math.inf, ""),
    ("harness.tail_steps", 0, math.inf, ""),  # k = 0: nothing kept verbatim
    ("harness.summary_tokens", 0, math.inf, ""),  # m = 0: a summary of nothing
    ("harness.summary_budget", 1, math.inf, ""),  # room for the end token at least (the window caps it too)
    ("harness.max_compactions", 0, math.inf, ""),
    ("harness.max_steps", 1, math.inf, ""),
    ("policy.n_layer", 1, math.inf, ""),
    ("policy.dropout", 0.0, 1.0, "hi"),  # a probability; 1 drops everything
    ("train.gamma", 0.0, 1.0, "lo"),  # a discount in (0, 1]
    ("train.lr", 0.0, math.inf, "lo"),
    ("train.eps_low", 0.0, math.inf, "lo"),  # a clip range of 0 allows no step
    ("train.eps_high", 0.0, math.inf, "lo"),
    ("train.max_grad_norm", 0.0, math.inf, "lo"),
    ("train.temperature", 0.0, math.inf, "lo"),
    ("train.entropy_coef", 0.0, 1.0, ""),
    ("train.cost_coef", 0.0, math.inf, ""),  # a penalty, never a bonus
    ("train.summary_weight", 0.0, math.inf, ""),  # FoldAct's summary loss weight: 0 masks it, never negative
    ("train.frac_spread", 0.0, 1.0, "hi"),
    ("train.group_size", 1, math.inf, ""),
    ("train.prompts", 1, math.inf, ""),
    ("train.steps", 0, math.inf, ""),  # 0 RL steps: evaluate the base model only
    ("train.epochs", 1, math.inf, ""),
    ("train.minibatch_tokens", 0, math.inf, ""),  # 0: one batch of every row
    ("base.quality", 0.0, 1.0, ""),
    ("base.steps", 0, math.inf, ""),
    ("base.episodes", 1, math.inf, ""),
    ("eval.every", 1, math.inf, ""),
    ("eval.episodes", 1, math.inf, ""),
]
SECTION_OF: dict[str, type[Section]] = {cls.SECTION: cls for cls in SECTIONS}


def _edge_values(lo: float, hi: float, open_ends: str, integer: bool) -> tuple[list[float], list[float]]:
    """(values the key must take, values it must refuse) at the ends of [lo, hi]."""
    step = 1 if integer else 1e-9
    good, bad = [], []
    if open_ends in ("lo", "both"):
        good.append(lo + step)
        bad.append(lo)
    else:
        good.append(lo)
        bad.append(lo - step)
    if hi != math.inf:
        if open_ends in ("hi", "both"):
            good.append(hi - step)
            bad.append(hi)
        else:
            good.append(hi)
            bad.append(hi + step)
    return good, bad


@pytest.mark.parametrize(("key", "lo", "hi", "open_ends"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_each_bound_is_where_it_should_be(key: str, lo: float, hi: float, open_ends: str) -> None:
    section, _, name = key.partition(".")
    cls = SECTION_OF[section]
    integer = isinstance(lo, int)
    good, bad = _edge_values(lo, hi, open_ends, integer)
    for value in good:
        cls.check_fields({name: int(value) if integer else value})
    for value in bad:
        with pytest.raises(ConfigError, match=rf"`{key}=.*` is invalid"):
            cls.check_fields({name: int(value) if integer else value})


def _not_checkpoints(tmp_path: Path) -> dict[str, Path]:
    """Files that exist but are not a checkpoint of the default task: TOML, empty, another vocabulary's."""
    from simlab.policy.checkpoint import save_checkpoint
    from simlab.policy.model import Policy

    toml, empty, other = tmp_path / "run.toml", tmp_path / "empty.pt", tmp_path / "other-vocab.pt"
    toml.write_text('[train]\nlr = 1e-3\n', encoding="utf-8")
    empty.write_bytes(b"")
    save_checkpoint(other, Policy(resolve({"task": {"vocab_size": 40}}).policy), meta={"v_sum": "v1"})
    return {"toml": toml, "empty": empty, "vocab": other}


@pytest.mark.parametrize("kind", ["toml", "empty", "vocab"])
def test_a_file_that_is_not_a_checkpoint_is_refused_before_the_store(tmp_path: Path, kind: str) -> None:
    """Issue 30: a TOML file ended in a traceback, an empty one in "Aborted.", and training wrote under
    the store first."""
    path = _not_checkpoints(tmp_path)[kind]
    before = path.read_bytes()
    out = run("train", "--set", "harness.summariser=frozen", "--set", f"train.summariser_checkpoint={path}",
              "--out", str(tmp_path / "run"), "--store", str(tmp_path / "s"))
    says = {"toml": "it is not a torch checkpoint (a text file", "empty": "it is an empty file, not a torch checkpoint",
            "vocab": "its policy reads vocab_size=40, another task's vocabulary"}[kind]  # what the file is not
    _fails_cleanly(out, f"`train.summariser_checkpoint='{path}'` is invalid; {says}")
    assert not (tmp_path / "s").exists() and not (tmp_path / "run").exists() and path.read_bytes() == before
    shown = run("inspect", "--task", "keyrecall-tiny", "--checkpoint", str(path))
    _fails_cleanly(shown, f"`checkpoint='{path}'` is invalid; {says}")
    assert path.read_bytes() == before


# ------------------------------------------------------- issue 42: summaries of a chosen length, the cue, FoldAct
@pytest.mark.parametrize(("settings", "words"), [
    (["harness.summary_budget=0"], ("harness.summary_budget", "0")),
    (["harness.summary_budget=48"], ("harness.summary_budget", "48", "[1, 47]")),
    # no room for the threshold: the recipe's derivation is named
    (["harness.summary_budget=17"], ("harness.summary_budget", "17", "train.recipe='supo' derives harness.frac")),
    (["task.cue_reliability=1.5"], ("task.cue_reliability", "1.5", "[0, 1]")),
    (["task.cue_reliability=-0.1"], ("task.cue_reliability", "-0.1")),
    (["train.summary_loss=separate", "train.summary_weight=inf"], ("train.summary_weight", "inf")),
    (["train.summary_loss=separate", "train.summary_weight=nan"], ("train.summary_weight", "nan")),
    (["train.summary_weight=2"], ("train.summary_weight", "2", "summary_loss='separate'")),
    (["harness.cut_summary=fail"], ("harness.cut_summary", "'fail'", "harness.summary_budget")),
    (["harness.summary_budget=4", "harness.cut_summary=drop"], ("harness.cut_summary", "'drop'", "'truncate'")),
])
def test_summary_settings_are_refused_before_anything_is_written(tmp_path: Path, settings: list[str],
                                                                 words: tuple[str, ...]) -> None:
    args = [a for s in ["task.preset=keyrecall-cue", *settings] for a in ("--set", s)]
    out = run("train", *args, "--out", str(tmp_path / "run"), "--store", str(tmp_path / "s"))
    _fails_cleanly(out, *words)
    assert list(tmp_path.iterdir()) == []
