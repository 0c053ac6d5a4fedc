"""Tiny run configurations that train in seconds on a CPU."""

from __future__ import annotations

from typing import Any

import pytest
import torch

TINY: dict[str, Any] = {
    "task": {"num_facts": 3, "horizon": [8, 10], "vocab_size": 32},
    "harness": {"window": 40, "summary_tokens": 4, "max_compactions": 6},
    "policy": {"n_layer": 1, "d_model": 32, "n_head": 2},
    "base": {"steps": 2, "episodes": 8},
    "train": {"steps": 2, "prompts": 2, "group_size": 4, "minibatch_segments": 16},
    "eval": {"every": 1, "episodes": 8},
}


def tiny(**sections: dict[str, Any]) -> dict[str, Any]:
    """TINY with some sections' settings replaced or added."""
    out = {k: dict(v) for k, v in TINY.items()}
    for name, values in sections.items():
        out.setdefault(name, {}).update(values)
    return out


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
