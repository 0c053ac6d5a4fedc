"""A spec's checks are linear in its size (issue 30): a spec with 12,000 variants is checked as a small one
is (120,000 seeds: tests/sweep/test_spec.py). A variant's name was compared with every earlier one, and
each grid point scanned the variants for its own settings. No timing here: ``benchmarks/bench_input.py``
prints the ratio of checking to reading; these tests pin what the checks say on a large spec."""

from __future__ import annotations

import tomllib

import pytest

from simlab.sweep import SpecError, parse_spec
from simlab.sweep.spec import probe_settings

VARIANTS = 12_000


def _spec(seeds: list[int], variants: list[str] | None = None) -> dict:
    text = f"seeds = {seeds}\n[objective]\nmetric = \"eval/compacted/success\"\n"
    if variants is None:
        text += "[space]\ntrain.lr = [0.1, 0.2]\n"
    for name in variants or []:
        text += f'[[variants]]\nname = "{name}"\nset = {{ "train.lr" = 0.1 }}\n'
    return tomllib.loads(text)


def test_many_variants_parse_and_a_repeated_name_is_refused_by_its_index() -> None:
    names = [f"v{i}" for i in range(VARIANTS)]
    spec = parse_spec(_spec([0], names))
    probes = probe_settings(spec)
    assert len(probes) == VARIANTS and probes[-1] == {"train.lr": 0.1}
    with pytest.raises(SpecError, match=rf"`variants\[{VARIANTS}\].name='v5'` is invalid; give each variant a "
                                        "distinct name"):
        parse_spec(_spec([0], [*names, "v5"]))
