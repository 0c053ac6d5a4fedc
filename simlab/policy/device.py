"""Where the policy runs and in which precision: CUDA when present, CPU otherwise; bf16 autocast on CUDA.

CPU stays in fp32: bf16 matmuls on CPU are slow on most hosts and would make CPU tests disagree with the
fp32 reference paths they check against.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


def default_device() -> torch.device:
    """CUDA device 0 when available, else the CPU."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


@contextlib.contextmanager
def autocast(device: torch.device, enabled: bool) -> Iterator[None]:
    """bf16 autocast on CUDA when ``enabled``; a no-op on every other device."""
    if enabled and device.type == "cuda":
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            yield
    else:
        yield
