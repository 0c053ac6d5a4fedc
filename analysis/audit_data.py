"""The published figures the audit reads: ``published.toml`` as validated records.

Owns ``published.toml`` (the data, with sources): the records it holds (scores, backbone x benchmark grids,
claims, ablations) and their loader, which checks every field and resolves every score reference at load
time. Judging the claims is :mod:`simlab.analysis.audit`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np

from simlab.analysis import stats
from simlab.errors import AuditDataError


def default_data_path() -> Path:
    """The packaged ``analysis/published.toml``."""
    return Path(str(resources.files("simlab.analysis") / "published.toml"))


# --------------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Score:
    """One published figure, in points, with what is known about how it was measured."""

    id: str
    paper: str
    table: str
    benchmark: str
    metric: str
    method: str
    value: float
    eval_size: int | None = None
    runs: int | None = None
    working_context_k: float | None = None
    max_compactions: int | None = None

    @property
    def episodes(self) -> int | None:
        """Episodes behind the figure, eval_size x runs; None when the paper does not say."""
        if self.eval_size is None or self.runs is None:
            return None
        return self.eval_size * self.runs

    @property
    def horizon_k(self) -> float | None:
        """Effective horizon L x (S + 1) in thousands of tokens; None when unknown."""
        if self.working_context_k is None or self.max_compactions is None:
            return None
        return stats.effective_horizon(self.working_context_k, self.max_compactions)

    def estimate(self) -> stats.MeanSE | None:
        """The figure as a pooled binomial rate with its SE; None without an episode count."""
        n = self.episodes
        return None if n is None else stats.rate_mean_se([self.value / stats.POINTS], [n])


@dataclass(frozen=True)
class Grid:
    """A backbone x benchmark table of figures for one method."""

    id: str
    paper: str
    table: str
    metric: str
    method: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    values: np.ndarray
    """(rows, columns) figures in points."""

    def cell(self, row: str, column: str) -> Score:
        """The score in ``row`` and ``column`` of this grid, as a :class:`Score` of its own."""
        i, j = self.rows.index(row), self.columns.index(column)
        return Score(
            id=f"{self.id}[{row}/{column}]",
            paper=self.paper,
            table=self.table,
            benchmark=f"{column} ({row})",
            metric=self.metric,
            method=self.method,
            value=float(self.values[i, j]),
        )


@dataclass(frozen=True)
class Claim:
    """One audited comparison, treatment - baseline."""

    id: str
    title: str
    kind: str
    """"difference" (two scores) or "mean_difference" (mean over the cells of two grids)."""
    treatment: str
    baseline: str
    published: float | None = None
    """The figure the paper states for this comparison, if it states one."""
    published_label: str = "paper's"
    published_group: str | None = None
    """Claims that compete for one stated figure: it is matched if any of them reproduces it."""
    question: str | None = None
    """"lead": the claim asks whether the treatment leads the baseline at all."""


@dataclass(frozen=True)
class Ablation:
    """A published ablation: ablated - full, on one simlab axis."""

    id: str
    title: str
    full: str
    ablated: str
    axis: str
    full_setting: str
    ablated_setting: str


@dataclass(frozen=True)
class Published:
    """The whole data file, with score references resolved on demand."""

    papers: dict[str, dict[str, str]]
    scores: dict[str, Score]
    grids: dict[str, Grid]
    claims: tuple[Claim, ...]
    ablations: tuple[Ablation, ...]

    def score(self, ref: str) -> Score:
        """A score id, or one grid cell as ``grid_id[row/column]``."""
        if ref in self.scores:
            return self.scores[ref]
        grid_id, _, cell = ref.partition("[")
        row, _, column = cell.removesuffix("]").partition("/")
        grid = self.grids.get(grid_id)
        if grid is None or row not in grid.rows or column not in grid.columns:
            raise AuditDataError(f"`{ref}` names no score and no grid cell; scores are {sorted(self.scores)}")
        return grid.cell(row, column)

    def source(self, paper: str, table: str) -> str:
        """Where a paper's table is: its arXiv id (or URL) and the table's name."""
        meta = self.papers[paper]
        where = f"arXiv {meta['arxiv']}" if "arxiv" in meta else meta["url"].removeprefix("https://")
        return f"{where} {table}"


# ---------------------------------------------------------------------------------------- loading
_MISSING = object()


def _get(
    table: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any = _MISSING
) -> Any:
    if key not in table:
        if default is _MISSING:
            raise AuditDataError(f"`{where}.{key}` is missing")
        return default
    value = table[key]
    bad_bool = isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
    if bad_bool or not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise AuditDataError(f"`{where}.{key}={value!r}` is invalid; choose a value of type {names}")
    return value


def _points(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 <= float(value) <= 100.0:
        raise AuditDataError(f"`{where}={value!r}` is invalid; choose points in [0, 100]")
    return float(value)


def _positive_int(table: dict[str, Any], key: str, where: str, *, minimum: int) -> int | None:
    value: int | None = _get(table, key, int, where, None)
    if value is not None and value < minimum:
        raise AuditDataError(f"`{where}.{key}={value!r}` is invalid; choose an integer >= {minimum}")
    return value


def _provenance(raw: dict[str, Any], where: str, papers: dict[str, Any]) -> dict[str, str]:
    """The fields every figure carries: id, paper, table, metric, method."""
    fields = {key: _get(raw, key, str, where) for key in ("id", "paper", "table", "metric", "method")}
    if fields["paper"] not in papers:
        raise AuditDataError(
            f"`{where}.paper={fields['paper']!r}` is invalid; choose one of {sorted(papers)}"
        )
    return fields


def _score(raw: dict[str, Any], where: str, papers: dict[str, Any]) -> Score:
    working = _get(raw, "working_context_k", (int, float), where, None)
    if working is not None and not working > 0:
        raise AuditDataError(f"`{where}.working_context_k={working!r}` is invalid; choose a length > 0")
    return Score(
        **_provenance(raw, where, papers),
        benchmark=_get(raw, "benchmark", str, where),
        value=_points(_get(raw, "value", Real, where), f"{where}.value"),
        eval_size=_positive_int(raw, "eval_size", where, minimum=1),
        runs=_positive_int(raw, "runs", where, minimum=1),
        working_context_k=None if working is None else float(working),
        max_compactions=_positive_int(raw, "max_compactions", where, minimum=0),
    )


def _grid(raw: dict[str, Any], where: str, papers: dict[str, Any]) -> Grid:
    rows = tuple(_get(raw, "rows", list, where))
    columns = tuple(_get(raw, "columns", list, where))
    values = _get(raw, "values", list, where)
    shape_ok = len(values) == len(rows) and all(
        isinstance(r, list) and len(r) == len(columns) for r in values
    )
    if not rows or not columns or not shape_ok:
        raise AuditDataError(
            f"`{where}.values` is invalid; choose {len(rows)} rows of {len(columns)} figures"
        )
    grid = [[_points(v, f"{where}.values[{i}][{j}]") for j, v in enumerate(r)] for i, r in enumerate(values)]
    return Grid(
        **_provenance(raw, where, papers),
        rows=rows,
        columns=columns,
        values=np.asarray(grid, dtype=np.float64),
    )


def _claim(raw: dict[str, Any], where: str) -> Claim:
    kind = _get(raw, "kind", str, where)
    if kind not in ("difference", "mean_difference"):
        raise AuditDataError(
            f"`{where}.kind={kind!r}` is invalid; choose one of ['difference', 'mean_difference']"
        )
    question = _get(raw, "question", str, where, None)
    if question not in (None, "lead"):
        raise AuditDataError(f"`{where}.question={question!r}` is invalid; choose 'lead' or leave it out")
    published = _get(raw, "published", Real, where, None)
    return Claim(
        id=_get(raw, "id", str, where),
        title=_get(raw, "title", str, where),
        kind=kind,
        treatment=_get(raw, "treatment", str, where),
        baseline=_get(raw, "baseline", str, where),
        published=None if published is None else float(published),
        published_label=_get(raw, "published_label", str, where, "paper's"),
        published_group=_get(raw, "published_group", str, where, None),
        question=question,
    )


def _ablation(raw: dict[str, Any], where: str) -> Ablation:
    fields = ("id", "title", "full", "ablated", "axis", "full_setting", "ablated_setting")
    return Ablation(**{f: _get(raw, f, str, where) for f in fields})


def _unique(items: list[Any], what: str) -> None:
    ids = [item.id for item in items]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise AuditDataError(f"{what} ids must be unique; repeated: {dupes}")


def load_published(path: str | Path | None = None) -> Published:
    """Read and validate the published-results file (the packaged one by default)."""
    source = Path(path) if path is not None else default_data_path()
    try:
        raw = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise AuditDataError(f"`--data={str(source)!r}` cannot be read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise AuditDataError(f"`--data={str(source)!r}` is not valid TOML: {exc}") from exc
    if raw.get("schema") != 1:
        raise AuditDataError(f"`schema={raw.get('schema')!r}` in {source} is invalid; choose 1")
    papers = _get(raw, "papers", dict, "file")
    for key, meta in papers.items():
        if not isinstance(meta, dict) or not ({"arxiv", "url"} & meta.keys()):
            raise AuditDataError(f"`papers.{key}` is invalid; give it an `arxiv` id or a `url`")
    scores = [_score(s, f"scores[{i}]", papers) for i, s in enumerate(_get(raw, "scores", list, "file"))]
    grids = [_grid(g, f"grids[{i}]", papers) for i, g in enumerate(_get(raw, "grids", list, "file", []))]
    claims = [_claim(c, f"claims[{i}]") for i, c in enumerate(_get(raw, "claims", list, "file"))]
    ablations = [
        _ablation(a, f"ablations[{i}]") for i, a in enumerate(_get(raw, "ablations", list, "file", []))
    ]
    for items, what in ((scores, "score"), (grids, "grid"), (claims, "claim"), (ablations, "ablation")):
        _unique(items, what)
    data = Published(
        papers=papers,
        scores={s.id: s for s in scores},
        grids={g.id: g for g in grids},
        claims=tuple(claims),
        ablations=tuple(ablations),
    )
    for claim in claims:  # resolve every reference now, so a typo fails at load time
        if claim.kind == "mean_difference":
            for ref in (claim.treatment, claim.baseline):
                if ref not in data.grids:
                    raise AuditDataError(
                        f"claim `{claim.id}`: `{ref}` names no grid; grids are {sorted(data.grids)}"
                    )
            t, b = data.grids[claim.treatment], data.grids[claim.baseline]
            if t.values.shape != b.values.shape:
                raise AuditDataError(f"claim `{claim.id}`: grids {t.id} and {b.id} differ in shape")
        else:
            data.score(claim.treatment), data.score(claim.baseline)
    for ablation in ablations:
        data.score(ablation.full), data.score(ablation.ablated)
    return data
