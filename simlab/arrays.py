"""The array types every layer names: one definition for the batch, the harness and the checks."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

__all__ = ["BoolArray", "FloatArray", "IntArray"]
