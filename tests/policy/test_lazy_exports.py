"""simlab.policy loads its names on first use, so the config layer reads PolicyConfig without torch."""

from __future__ import annotations

import subprocess
import sys

import simlab.policy as policy
from simlab.policy import _MODULE_OF


def test_every_exported_name_has_one_home_and_loads() -> None:
    assert sorted(policy.__all__) == sorted(_MODULE_OF)
    for name in policy.__all__:
        assert getattr(policy, name).__module__.startswith("simlab.policy."), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        policy.Nope  # noqa: B018
    except AttributeError as exc:
        assert "Nope" in str(exc)
    else:
        raise AssertionError("simlab.policy.Nope did not raise")


def test_the_config_layer_does_not_import_torch() -> None:
    probe = "import sys, simlab.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
