"""Every shipped spec's fingerprint, pinned: what each cell of a shipped sweep means (base, space, variants,
objective, sampler; :meth:`~simlab.sweep.spec.SweepSpec.fingerprint`) changes only on purpose.

A study opens only under the spec it was made from, so a changed fingerprint refuses every store that ran
the spec before. When a spec's meaning changes on purpose, say so in the commit and re-record
(``python -m tests.sweep.test_shipped_fingerprints``); a new spec is added the same way. When one spelling
of every setting came in (issue 33), 30 of the 43 stayed as they were; the 12 that sweep ``task.preset``
and ``duo-limit`` moved (docs/sweeps-and-tracking.md, "One spelling").
"""

from __future__ import annotations

import pytest

from simlab.sweep.shipped import shipped_specs
from simlab.sweep.spec_parse import load_spec

PINNED = {
    'duo-limit': '123a1cd0552fc9d1',
    'findings/credit-slow': 'e8f6d281b57d61eb',
    'findings/gae-correction': 'df3a678b7362df8f',
    'findings/gae-dose': 'a0b47e6fccf4b72a',
    'findings/gae-lambda': '772b7fd479a24594',
    'findings/gae-mask': '6e35391be283295f',
    'findings/gae-strong': '80e35bf6abe8851a',
    'findings/gae-routes': 'b08616bd58323807',
    'findings/normaliser-dose': 'e973f276da93512c',
    'findings/overlong-confirm': 'c15634854fc3c5a6',
    'findings/overlong-dose': 'd6829484236bce03',
    'findings/overlong-learnable': 'c15634854fc3c5a6',
    'findings/overlong-mask': '76e94f45a7c5ce56',
    'findings/overlong-mask-long': '91479e716cc2954d',
    'findings/rollout-cost': '7585c738afcdf389',
    'findings/rollout-cost-instances': '21a70008b36a5856',
    'findings/rollout-cost-seeds': '72ef0d7caacde076',
    'findings/segment-normaliser': 'e64efbea308fd1a9',
    'findings/sgd-gae': '14ea0133de459906',
    'findings/sgd-overlong': '10acc2d614cc6ed1',
    'findings/sgd-trajectory': 'da0f421b8535e431',
    'findings/summariser-swap': '5581e0890daf0979',
    'findings/train-serve': '88a7117caa6a591f',
    'findings/train-serve-fits': '5fb59c53e9dab846',
    'findings/trajectory-dose': '68b00f31493fcc91',
    'findings/trajectory-group': '55bfb5a33d55d9b7',
    'findings/winners': '36737653c51a1ed0',
    'lambda': 'e9a5a1b78b58fa01',
    'masks': '3f4a26cb6f54c042',
    'normaliser': 'fe0ab0b73eb637fa',
    'questions/baseline-finished': '0aa5715ed7cd2b06',
    'questions/cost-penalty': '461e1375de4310b5',
    'questions/cut-summary': 'c67ed7c9a70e40ee',
    'questions/per-rollout-mean': 'a5d70d79589d47e9',
    'questions/row-weight': '363dd597cf50d370',
    'questions/schedule-unit': '6eecedd4956dbf83',
    'questions/segment-ratio': 'b12155c06345b3f1',
    'questions/summary-loss': 'ba38bbc089aaf880',
    'questions/threshold-draw': '5564d00e5aede26b',
    'quick': '82538291c4dd759e',
    'recipes': 'f865b8b27f64945b',
    'recipes-equal': '5c984e69d4b98ba2',
    'recipes-followup': '019d978390034d82',
    'recipes-learning': 'ddc448c0b131a6d3',
    'recipes-learning-ppo': 'df532dc4f6c286d7',
    'recipes-question': '120c5c84f59739e5',
    'resum-lossy': 'fdbb6ce5b6dd763a',
    'summariser-swap': '98e9f0a0993ace6f',
    'summaries/compaction-credit': '1b6a20fc447e07ec',
    'summaries/duo-credit': 'ac021628bfe31089',
    'summaries/length': 'bd6d04c938b6cef0',
    'summaries/length-paid': 'dfe1879f242e775a',
    'summaries/relevance': '18e146fedc769434',
    'summaries/relevance-paired': 'fa6e1f6a291f6f9e',
    'threshold': 'da315df9aa4355af',
}


def test_every_shipped_spec_is_pinned() -> None:
    assert sorted(shipped_specs()) == sorted(PINNED)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_shipped_spec_means_what_it_meant(name: str) -> None:
    assert load_spec(shipped_specs()[name]).fingerprint() == PINNED[name]


if __name__ == "__main__":  # pragma: no cover - re-record by hand
    for spec_name, path in shipped_specs().items():
        print(f"    {spec_name!r}: {load_spec(path).fingerprint()!r},")
