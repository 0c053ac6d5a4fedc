"""simlab.policy and simlab.harness load their names on first use (simlab.lazy): the config layer reads
PolicyConfig without torch, and the command line reads HarnessConfig without the rollout loop. The analysis
subpackages export nothing: a name is imported from its module."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import simlab.harness as harness
import simlab.policy as policy

PACKAGES = [policy, harness]
IDS = ["policy", "harness"]


@pytest.mark.parametrize("package", PACKAGES, ids=IDS)
def test_every_exported_name_has_one_home_and_loads(package: object) -> None:
    home = package._HOME  # type: ignore[attr-defined]
    assert sorted(package.__all__) == sorted(n for names in home.values() for n in names)  # type: ignore[attr-defined]
    for module, names in home.items():
        submodule = importlib.import_module(f"{package.__name__}.{module}")  # type: ignore[attr-defined]
        for name in names:
            assert getattr(package, name) is getattr(submodule, name), name


@pytest.mark.parametrize("package", PACKAGES, ids=IDS)
def test_an_unknown_name_is_an_attribute_error(package: object) -> None:
    with pytest.raises(AttributeError, match="Nope"):
        package.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_the_config_layer_does_not_import_torch() -> None:
    probe = "import sys, simlab.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def test_the_command_line_does_not_import_the_rollout_loop() -> None:
    probe = "import sys, simlab.cli; print('simlab.harness.loop' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False False", out.stdout + out.stderr
