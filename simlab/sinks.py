"""Metric sinks: where a training run writes its params, metrics, tags and artifacts.

The trainer only knows the :class:`MetricSink` protocol. :class:`JsonlSink` writes JSON lines to a
folder (no server, no database); the tracking layer backs the same protocol with MLflow. Metrics
arrive as one dict per step and are written in one call: a sink never logs one value per call.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class MetricSink(Protocol):
    """What a training run writes to."""

    def log_params(self, params: dict[str, Any]) -> None:
        """The full resolved config, flattened to ``{"section.key": value}``."""
        ...

    def set_tags(self, tags: dict[str, str]) -> None:
        """Searchable labels: recipe, estimator names, v_sum version, git commit, simlab version."""
        ...

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Every metric of one training step, in one batched write."""
        ...

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """A file produced by the run (config, figure, parquet table)."""
        ...

    def close(self, status: str = "FINISHED", reason: str = "") -> None:
        """End the run: ``FINISHED`` or ``FAILED`` (with the reason)."""
        ...


class JsonlSink:
    """Writes ``params.json``, ``tags.json``, ``metrics.jsonl`` and ``artifacts/`` under ``folder``."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._metrics = (self.folder / "metrics.jsonl").open("a", encoding="utf-8")

    def _write_json(self, name: str, data: dict[str, Any]) -> None:
        tmp = self.folder / f".{name}.tmp"
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str), encoding="utf-8")
        os.replace(tmp, self.folder / name)

    def log_params(self, params: dict[str, Any]) -> None:
        """Write ``params.json`` (replacing an earlier one)."""
        self._write_json("params.json", params)

    def set_tags(self, tags: dict[str, str]) -> None:
        """Add ``tags`` to ``tags.json`` (a tag set again takes its new value)."""
        path = self.folder / "tags.json"
        earlier = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        self._write_json("tags.json", {**earlier, **tags})

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Append one line to ``metrics.jsonl``; NaN and infinities become null."""
        clean = {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}
        self._metrics.write(json.dumps({"step": step, **clean}, sort_keys=True) + "\n")
        self._metrics.flush()

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """Copy ``path`` to ``artifacts/<artifact_path>/``."""
        dest = self.folder / "artifacts" / (artifact_path or "")
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / Path(path).name)

    def close(self, status: str = "FINISHED", reason: str = "") -> None:
        """Close the metrics file and write ``status.json``."""
        if not self._metrics.closed:
            self._metrics.close()
        self._write_json("status.json", {"status": status, "reason": reason})


def read_metrics(folder: Path | str) -> list[dict[str, Any]]:
    """The metric rows a :class:`JsonlSink` wrote, in order."""
    path = Path(folder) / "metrics.jsonl"
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
