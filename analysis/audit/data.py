"""The published figures the audit reads: ``published.toml`` as validated records.

Owns ``published.toml`` (the data, with sources): the records it holds (scores, backbone x benchmark grids,
claims, ablations) and their loader, which checks every field and resolves every score reference at load
time. Judging the claims is :mod:`simlab.analysis.audit.table`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, model_validator

from simlab.analysis.statistics import stats
from simlab.errors import AuditDataError
from simlab.rules import COUNT_MAX, TABLE, Real, check_value, refuse
from simlab.schema import read_toml


def default_data_path() -> Path:
    """The packaged ``analysis/published.toml``."""
    return Path(str(resources.files("simlab.analysis") / "published.toml"))


# --------------------------------------------------------------------------------------- records
_RECORD = ConfigDict(**{**TABLE, "extra": "ignore"})
"""A record of ``published.toml``: strict, and keys it does not know are left for later readers."""
Points = Annotated[Real, Field(ge=0, le=100), AfterValidator(float)]
"""A published figure, in points."""
Count = Annotated[int, Field(ge=1, le=COUNT_MAX)]


class Figure(BaseModel):
    """Where a figure comes from: every score and grid carries these."""

    model_config = _RECORD
    id: str
    paper: str
    table: str
    metric: str
    method: str


class Score(Figure):
    """One published figure, in points, with what is known about how it was measured."""

    benchmark: str
    value: Points
    eval_size: Count | None = None
    runs: Count | None = None
    working_context_k: Annotated[Real, Field(gt=0), AfterValidator(float)] | None = None
    max_compactions: Annotated[int, Field(ge=0, le=COUNT_MAX)] | None = None

    @property
    def horizon_k(self) -> float | None:
        """Effective horizon L x (S + 1) in thousands of tokens; None when unknown."""
        if self.working_context_k is None or self.max_compactions is None:
            return None
        return stats.effective_horizon(self.working_context_k, self.max_compactions)

    def estimate(self) -> stats.MeanSE | None:
        """The figure as a pooled binomial rate on eval_size x runs episodes with its SE; None when the paper
        does not say how many."""
        if self.eval_size is None or self.runs is None:
            return None
        return stats.rate_mean_se([self.value / stats.POINTS], [self.eval_size * self.runs])


class Grid(Figure):
    """A backbone x benchmark table of figures for one method."""

    rows: Annotated[tuple[str, ...], Strict(False), Field(min_length=1)]
    columns: Annotated[tuple[str, ...], Strict(False), Field(min_length=1)]
    values: list[list[Points]]
    """(rows, columns) figures in points."""

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if len(self.values) != len(self.rows) or any(len(r) != len(self.columns) for r in self.values):
            raise refuse(f"choose {len(self.rows)} rows of {len(self.columns)} figures", suffix=".values",
                         value=self.values)
        return self

    @property
    def array(self) -> np.ndarray:
        """The figures as a (rows, columns) array."""
        return np.asarray(self.values, dtype=np.float64)

    def cell(self, row: str, column: str) -> Score:
        """The score in ``row`` and ``column`` of this grid, as a :class:`Score` of its own."""
        i, j = self.rows.index(row), self.columns.index(column)
        return Score(id=f"{self.id}[{row}/{column}]", paper=self.paper, table=self.table,
                     benchmark=f"{column} ({row})", metric=self.metric, method=self.method, value=self.values[i][j])


class Claim(BaseModel):
    """One audited comparison, treatment - baseline."""

    model_config = _RECORD
    id: str
    title: str
    kind: Literal["difference", "mean_difference"]
    """"difference" (two scores) or "mean_difference" (mean over the cells of two grids)."""
    treatment: str
    baseline: str
    published: Annotated[Real, AfterValidator(float)] | None = None
    """The figure the paper states for this comparison, if it states one."""
    published_label: str = "paper's"
    published_group: str | None = None
    """Claims that compete for one stated figure: it is matched if any of them reproduces it."""
    question: Literal["lead"] | None = None
    """"lead": the claim asks whether the treatment leads the baseline at all."""


class Ablation(BaseModel):
    """A published ablation: ablated - full, on one simlab axis."""

    model_config = _RECORD
    id: str
    title: str
    full: str
    ablated: str
    axis: str
    full_setting: str
    ablated_setting: str


class PublishedFile(BaseModel):
    """``published.toml`` as written."""

    model_config = _RECORD
    schema_: Literal[1] = Field(alias="schema")
    papers: dict[str, dict[str, Any]]
    """Paper key -> what is known of it: an ``arxiv`` id or a ``url`` (strings), and anything else."""
    scores: list[Score]
    grids: list[Grid] = Field(default_factory=list)
    claims: list[Claim]
    ablations: list[Ablation] = Field(default_factory=list)


@dataclass(frozen=True)
class Published:
    """The whole data file, with score references resolved on demand."""

    papers: dict[str, dict[str, Any]]
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
def _check_papers(file: PublishedFile) -> None:
    """Every paper has an arXiv id or a URL; every figure names a listed paper."""
    for key, meta in file.papers.items():
        if not any(isinstance(meta.get(k), str) for k in ("arxiv", "url")):
            raise AuditDataError(f"`papers.{key}` is invalid; give it an `arxiv` id or a `url`")
    for what, figures in (("scores", file.scores), ("grids", file.grids)):
        for i, fig in enumerate(figures):
            if fig.paper not in file.papers:
                raise AuditDataError.invalid(f"{what}[{i}].paper", fig.paper, f"choose one of {sorted(file.papers)}")


def _unique(items: list[Any], what: str) -> None:
    ids = [item.id for item in items]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise AuditDataError(f"{what} ids must be unique; repeated: {dupes}")


def load_published(path: str | Path | None = None) -> Published:
    """Read and validate the published-results file (the packaged one by default); an unreadable file or a
    bad field names itself."""
    raw = read_toml(Path(path) if path is not None else default_data_path(), "--data", AuditDataError)
    file: PublishedFile = check_value("", raw, PublishedFile, AuditDataError)
    _check_papers(file)
    scores, grids, claims, ablations = file.scores, file.grids, file.claims, file.ablations
    for items, what in ((scores, "score"), (grids, "grid"), (claims, "claim"), (ablations, "ablation")):
        _unique(items, what)
    data = Published(
        papers=file.papers,
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
            if t.array.shape != b.array.shape:
                raise AuditDataError(f"claim `{claim.id}`: grids {t.id} and {b.id} differ in shape")
        else:
            data.score(claim.treatment), data.score(claim.baseline)
    for ablation in ablations:
        data.score(ablation.full), data.score(ablation.ablated)
    return data
