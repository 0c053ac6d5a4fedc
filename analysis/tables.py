"""Rendering and writing result tables: Markdown for people, CSV and parquet for tools.

Shared by ``simlab audit`` and ``simlab report``. Writing is all-or-nothing: every file is written to a
temporary name in the target folder first and only renamed into place once all of them are complete.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from simlab.errors import OutputDirError


def number_text(x: float | None, fmt: str) -> str:
    """``x`` formatted by ``fmt``; ``n/a`` for a missing or NaN value (a table cell)."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub Markdown table, columns padded to their widest cell; ``|`` inside cells is escaped."""
    cells = [[str(c).replace("|", "\\|") for c in row] for row in [list(headers), *rows]]
    if any(len(row) != len(headers) for row in cells):
        raise ValueError(f"every row needs {len(headers)} cells, one per header")
    width = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, width, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in width) + "|"
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])]) + "\n"


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


def check_output_dir(out_dir: str | os.PathLike[str], option: str = "--out") -> Path:
    """The folder as a Path, or :class:`OutputDirError` naming ``option`` if it is missing, not a folder,
    or read-only."""
    path = Path(out_dir)
    if not path.is_dir():
        raise OutputDirError(f"`{option}={str(out_dir)!r}` is invalid; choose an existing folder")
    if not _writable(path):
        raise OutputDirError(f"`{option}={str(out_dir)!r}` is invalid; the folder is not writable")
    return path


def write_tables(
    frame: pl.DataFrame, markdown: str, out_dir: str | os.PathLike[str], stem: str
) -> list[Path]:
    """Write ``stem``.md, .csv and .parquet into ``out_dir``; nothing is left behind on failure."""
    folder = check_output_dir(out_dir)
    targets = {ext: folder / f"{stem}.{ext}" for ext in ("md", "csv", "parquet")}
    token = uuid.uuid4().hex  # plain temp names (not mkstemp) so the files get the umask's mode
    temps = {ext: folder / f".{stem}.{token}.{ext}.tmp" for ext in targets}
    try:
        temps["md"].write_text(markdown, encoding="utf-8")
        frame.write_csv(temps["csv"])
        frame.write_parquet(temps["parquet"])
        for ext, tmp in temps.items():
            os.replace(tmp, targets[ext])
    except OSError as exc:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
        raise OutputDirError(f"`--out={str(out_dir)!r}` could not be written: {exc}") from exc
    return list(targets.values())
