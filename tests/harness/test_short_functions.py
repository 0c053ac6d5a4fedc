"""House style: a function reads in one screen. In simlab (the tasks and the analysis included), none is
over 60 lines (its signature and docstring included) unless its docstring says why, in a sentence that
starts with ``Long because``."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import simlab

LIMIT = 60
def long_functions() -> list[str]:
    root = Path(simlab.__file__).parent
    out = []
    # os.walk follows simlab/tasks and simlab/analysis, links to the top-level folders (rglob would not)
    for package in sorted(Path(folder).relative_to(root) for folder, _, _ in os.walk(root, followlinks=True)):
        for path in sorted((root / package).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > LIMIT and "Long because" not in (ast.get_docstring(node) or ""):
                    out.append(f"{package}/{path.name}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_no_long_function_without_a_reason() -> None:
    assert long_functions() == [], "split these into phase functions, or say why in the docstring"
