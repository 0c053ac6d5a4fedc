"""A trainer's rows in a file: what ``simlab audit-batch`` reads and the ``simlab_sync`` trainer dumps.

A batch file holds, per row, its key ``{uid}_{session_id}_{index}``, its response mask, its reward (per
token, summed, or one per row) and optionally its finished flag:

- ``.parquet``: one row per trainer row, columns ``keys`` (str), ``response_mask`` (list of 0/1),
  ``rewards`` (list of floats, or a float) and optionally ``finished`` (bool);
- ``.pt`` (``torch.save``) or ``.pkl`` (``pickle``, as verl's ``DataProto.save_to_disk`` writes): a dict of
  those fields, or a verl ``DataProto`` whose ``batch`` or ``non_tensor_batch`` holds them.

Both are pickles, and a pickle can name any function to call while it loads: a ``.pt`` file loads through
``torch.load(..., weights_only=True)`` and a ``.pkl`` file through :class:`DataUnpickler`, each admitting only
the globals in :func:`allowed_globals` (issue 51). verl's ``DataProto`` and tensordict's ``TensorDict`` are
read by stand-ins here, never by their own loaders: ``DataProto.__setstate__`` loads its batch with
``torch.load(weights_only=False)``. A file that names any other global is refused and nothing in it runs.

verl's own spellings are read too (:data:`ALIASES`). Bad input is a :class:`~simlab.errors.RowsError`.
"""

from __future__ import annotations

import codecs
import io
import math
import pickle
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy._core.multiarray import _reconstruct, scalar

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


class Refused(Exception):
    """A pickle named a global outside :func:`allowed_globals` (``module.name``); nothing was called."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _DataProto:
    """verl's ``DataProto`` as the data it pickles: ``__getstate__`` gives (the batch, packed; the non-tensor
    batch; the meta info). verl's own ``__setstate__`` would unpack the batch with ``weights_only=False``."""

    state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _TensorDictClass:
    """Stands for ``tensordict._td.TensorDict`` where a pickle names the class (:func:`_tensordict_from_state`)."""


def _torch_dtypes() -> dict[str, Any]:
    """``"torch.float32"`` -> ``torch.float32``, every dtype torch has."""
    import torch

    return {str(t): t for t in vars(torch).values() if isinstance(t, torch.dtype)}


def _consolidated_tensordict(metadata: dict[str, Any], storage: Any) -> dict[str, Any]:
    """A consolidated ``TensorDict`` (every leaf a slice of one byte tensor, as verl's ``DataProto`` packs its
    batch) as a dict, read as tensordict's ``_rebuild_tensordict_files_consolidated`` reads it."""
    dtypes, meta = _torch_dtypes(), dict(metadata)
    out: dict[str, Any] = {key: value[0] for key, value in dict(meta.pop("non_tensors")).items()}
    for key, (dtype, shape, start, stop, _pad) in dict(meta.pop("leaves")).items():
        if key.startswith("<NJT"):
            raise TypeError("a nested jagged tensor is not read")
        out[key] = storage[start:stop].view(dtypes[dtype])[: math.prod(shape)].view(tuple(shape))
    for kept in ("cls", "cls_metadata", "size"):  # the class is TensorDict's; a batch needs its leaves only
        meta.pop(kept, None)
    return out | {key: _consolidated_tensordict(sub, storage) for key, sub in meta.items()}


def _tensordict_from_state(cls: Any, state: dict[str, Any]) -> dict[str, Any]:
    """A ``TensorDict`` that was not consolidated (tensordict's ``_make_td``) as a dict of its leaves."""
    if cls is not _TensorDictClass:
        raise TypeError(f"_make_td of {cls!r}")
    return dict(state["_tensordict"])


def _storage_from_bytes(data: bytes) -> Any:
    """A torch storage that plain ``pickle`` wrote (``torch.storage._load_from_bytes``, which loads with
    ``weights_only=False``), loaded with ``weights_only=True``."""
    import torch

    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def allowed_globals() -> dict[str, Any]:
    """Every global a batch file may name, ``module.name`` -> what it loads as: numpy's array, dtype and scalar
    rebuilders (under numpy 1's and numpy 2's module names), torch's tensor rebuilder, and verl's and
    tensordict's containers read by the stand-ins above."""
    import torch

    numpy = {f"{module}.{f.__name__}": f for module in ("numpy.core.multiarray", "numpy._core.multiarray")
             for f in (_reconstruct, scalar)}
    return numpy | {
        "numpy.ndarray": np.ndarray,
        "numpy.dtype": np.dtype,
        "collections.OrderedDict": OrderedDict,
        "_codecs.encode": codecs.encode,  # bytes under pickle protocol 2
        "torch.Size": torch.Size,
        "torch._utils._rebuild_tensor_v2": torch._utils._rebuild_tensor_v2,
        "torch.storage._load_from_bytes": _storage_from_bytes,
        "verl.protocol.DataProto": _DataProto,
        "tensordict._reductions._rebuild_tensordict_files_consolidated": _consolidated_tensordict,
        "tensordict._reductions._make_td": _tensordict_from_state,
        "tensordict._td.TensorDict": _TensorDictClass,
    }


class DataUnpickler(pickle.Unpickler):
    """A pickle reader that finds only the globals of :func:`allowed_globals` and refuses every other one."""

    def __init__(self, file: IO[bytes]) -> None:
        super().__init__(file)
        self.allowed = allowed_globals()

    def find_class(self, module: str, name: str) -> Any:
        """What ``module.name`` loads as; :class:`Refused` unless it is allowed."""
        found = self.allowed.get(f"{module}.{name}")
        if found is None:
            raise Refused(f"{module}.{name}")
        return found


def _torch_load(file: Any) -> Any:
    """``torch.load`` with ``weights_only=True``, :func:`allowed_globals` added to torch's own."""
    import torch

    # torch calls __setstate__ only on an instance whose type it admits: numpy's dtypes are one class each
    dtypes = [t for t in vars(np.dtypes).values() if isinstance(t, type) and issubclass(t, np.dtype)]
    extra: list[Any] = [(found, name) for name, found in allowed_globals().items()]
    with torch.serialization.safe_globals(extra + dtypes):
        return torch.load(file, map_location="cpu", weights_only=True)


def _numpy_packed(packed: tuple[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """A batch verl packed with ``VERL_DATAPROTO_SERIALIZATION_METHOD=numpy`` (``serialize_tensordict``)."""
    import torch

    dtypes = _torch_dtypes()

    def tensor(dtype: str, shape: Sequence[int], data: Any) -> Any:
        return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtypes[f"torch.{dtype}"]).view(tuple(shape))

    return {key: tensor(*item) if len(item) == 3 else [tensor(*row).numpy() for row in item[1]]
            for key, item in packed[2].items()}


def _proto_fields(state: Any) -> dict[str, Any]:
    """name -> column of a ``DataProto``'s state: its batch, then its non-tensor batch."""
    packed, non_tensor, _meta = state
    if isinstance(packed, bytes):
        batch = _torch_load(io.BytesIO(packed))
    else:
        batch = _numpy_packed(packed) if packed is not None else None
    if not isinstance(batch, dict | None) or not isinstance(non_tensor, dict):
        raise TypeError("a DataProto whose batch is not a TensorDict")
    return {**(batch or {}), **non_tensor}


def _refused(exc: Exception) -> str | None:
    """The global a load refused: simlab's own unpickler names it, torch's says it in its message."""
    if isinstance(exc, Refused):
        return exc.name
    found = re.search(r"GLOBAL (\S+) (was not an allowed global|whose module)", str(exc))
    return found.group(1) if isinstance(exc, pickle.UnpicklingError) and found else None


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
                obj = DataUnpickler(f).load()
        else:
            obj = _torch_load(path)
        if isinstance(obj, _DataProto):
            obj = _proto_fields(obj.state)
    except Exception as exc:
        name = _refused(exc)
        if name is not None:
            raise RowsError.invalid("FILE", str(path), f"it needs `{name}`, which audit-batch does not load: a batch "
                                    "file may hold arrays, tensors and verl batches, never code") from None
        raise RowsError.invalid("FILE", str(path), f"it is not a {path.suffix} batch ({type(exc).__name__})") from None
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
