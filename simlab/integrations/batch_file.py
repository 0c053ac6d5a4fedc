"""A trainer's rows in a file: what ``simlab audit-batch`` reads and the ``simlab_sync`` trainer dumps.

A batch file holds, per row, its key ``{uid}_{session_id}_{index}``, its response mask, its reward (per
token, summed, or one per row) and optionally its finished flag:

- ``.parquet``: one row per trainer row, columns ``keys`` (str), ``response_mask`` (list of 0/1),
  ``rewards`` (list of floats, or a float) and optionally ``finished`` (bool);
- ``.pt`` (``torch.save``) or ``.pkl`` (``pickle``, as verl's ``DataProto.save_to_disk`` writes): a dict of
  those fields, or a verl ``DataProto`` whose ``batch`` or ``non_tensor_batch`` holds them. Both are
  pickles: read only files you made.

verl's own spellings are read too (:data:`ALIASES`). Bad input is a :class:`~simlab.errors.RowsError`.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simlab.errors import RowsError

FIELDS = ("keys", "response_mask", "rewards", "finished")
"""The fields of a batch file, in the order :func:`write_batch` writes them."""
ALIASES: dict[str, tuple[str, ...]] = {
    "keys": ("keys", "key", "batch_keys"),
    "response_mask": ("response_mask", "loss_mask"),
    "rewards": ("rewards", "token_level_rewards", "rm_scores", "token_level_scores", "reward", "score"),
    "finished": ("finished",),
}
"""Each field and the names it may have in a file, the first preferred."""
SUFFIXES = (".parquet", ".pt", ".pth", ".pkl")


@dataclass(frozen=True)
class BatchFile:
    """The fields of a batch file, as arrays."""

    keys: list[str]
    response_mask: np.ndarray
    rewards: np.ndarray
    finished: np.ndarray | None


def _as_array(value: Any) -> Any:
    if hasattr(value, "detach"):  # a torch tensor, without importing torch here
        return value.detach().cpu().numpy()
    return value


def _padded(rows: Sequence[Any]) -> np.ndarray:
    """A list of per-row lists (a parquet list column) as a (B, T) grid, 0 past each row's end."""
    width = max((len(r) for r in rows), default=0)
    out = np.zeros((len(rows), width), dtype=np.float64)
    for b, r in enumerate(rows):
        out[b, : len(r)] = r
    return out


def _fields(path: Path) -> dict[str, Any]:
    """name -> column of what the file holds."""
    if path.suffix == ".parquet":
        import polars as pl

        try:
            frame = pl.read_parquet(path)
        except Exception as exc:  # polars raises its own types for a file that is not parquet
            raise RowsError.invalid("FILE", str(path), f"it is not a parquet file ({type(exc).__name__})") from None
        return {name: frame[name].to_list() for name in frame.columns}
    try:
        if path.suffix == ".pkl":
            with path.open("rb") as f:
                obj = pickle.load(f)
        else:
            import torch

            obj = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise RowsError.invalid("FILE", str(path), f"it is not a {path.suffix} batch ({type(exc).__name__})") from None
    if hasattr(obj, "batch") and hasattr(obj, "non_tensor_batch"):  # a verl DataProto
        return {**dict(obj.batch.items() if obj.batch is not None else {}), **dict(obj.non_tensor_batch)}
    if isinstance(obj, dict):
        return obj
    raise RowsError.invalid("FILE", str(path), f"it holds a {type(obj).__name__}; give a dict of {list(FIELDS)} "
                            "or a verl DataProto")


def _pick(fields: dict[str, Any], name: str, path: Path) -> Any:
    for alias in ALIASES[name]:
        if alias in fields:
            return fields[alias]
    if name == "finished":
        return None
    raise RowsError.invalid("FILE", str(path), f"it has no {name} (one of {list(ALIASES[name])}); "
                            f"it holds {sorted(map(str, fields))}")


def read_batch(path: Path) -> BatchFile:
    """The rows of a batch file; ``RowsError`` (one line) when it is not one."""
    if path.suffix not in SUFFIXES:
        raise RowsError.invalid("FILE", str(path), f"give a batch file ending in one of {list(SUFFIXES)}")
    if not path.is_file():
        raise RowsError.invalid("FILE", str(path), "no such file")
    fields = _fields(path)
    keys = [str(k) if isinstance(k, np.str_) else k for k in list(_as_array(_pick(fields, "keys", path)))]
    mask, rewards = (_as_array(_pick(fields, n, path)) for n in ("response_mask", "rewards"))
    if isinstance(mask, list):
        mask = _padded(mask)
    if isinstance(rewards, list) and rewards and isinstance(rewards[0], (list, np.ndarray)):
        rewards = _padded(rewards)
    finished = _pick(fields, "finished", path)
    return BatchFile(keys, np.asarray(mask), np.asarray(rewards, dtype=np.float64),
                     None if finished is None else np.asarray(_as_array(finished), dtype=np.bool_))


def write_batch(path: Path, keys: Sequence[str], response_mask: Any, rewards: Any,
                finished: Sequence[bool] | None = None) -> Path:
    """Write rows to ``path`` (``.pt``: a ``torch.save`` dict; ``.parquet``: one row per trainer row)."""
    mask, reward = np.asarray(_as_array(response_mask)), np.asarray(_as_array(rewards), dtype=np.float64)
    columns: dict[str, Any] = {"keys": list(keys), "response_mask": mask, "rewards": reward}
    if finished is not None:
        columns["finished"] = np.asarray(finished, dtype=np.bool_)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        import polars as pl

        frame = pl.DataFrame({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in columns.items()})
        frame.write_parquet(path)
    else:
        import torch

        torch.save({k: torch.as_tensor(v) if isinstance(v, np.ndarray) else v for k, v in columns.items()}, path)
    return path
