"""Loading on first use: a package's names (PEP 562), and numba's compiled loops.

A package lists where each of its public names lives (``_HOME``); :func:`exports` gives it a module
``__getattr__`` that imports the submodule on first use. Its ``__all__`` stays a literal list, for the
linters (``tests/policy/test_lazy_exports.py`` holds the two equal). ``simlab.policy`` uses it so the config
layer reads ``PolicyConfig`` without torch; ``simlab.harness`` so the command line reads
``HarnessConfig`` (for ``simlab inspect``'s options) without the rollout loop and numba.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast


def exports(package: str, home: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``, whose names live in the submodules ``home`` maps them to."""
    module_of = {name: module for module, names in home.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__


_F = TypeVar("_F", bound=Callable[..., Any])


def jit(fn: _F) -> _F:
    """``numba.njit(cache=True, nogil=True)`` applied on the first call: a module of compiled loops
    imports without numba (about 0.15-0.3 s), so checking a config or printing help does not pay for it."""
    compiled: Any = None

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal compiled
        if compiled is None:
            import numba

            compiled = numba.njit(cache=True, nogil=True)(fn)
        return compiled(*args, **kwargs)

    return cast(_F, call)
