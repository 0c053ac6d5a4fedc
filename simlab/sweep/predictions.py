"""A spec's pre-registered claims as data: ``[[predictions]]`` and ``[[preconditions]]`` (the ledger's grammar).

Each claim names what is read per seed from the spec's exported histories: one arm's metric at one step, less
(optionally) the same arm at an earlier step (a change), another arm at the same step (paired by seed), or both
(one arm's change less another's, paired by seed). A
prediction then says how many seeds must meet its comparison (``seeds``), or that the mean over seeds must
(``seeds`` left out), optionally with a paired t-test's p-value below ``p_below``. A precondition is read on the
mean over seeds; where one fails, the design does not test its mechanism and its predictions are not tested.
:mod:`simlab.analysis.ledger` evaluates them; the runner ignores them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from simlab.rules import TABLE

Comparison = Literal[">=", "<=", ">", "<", "within", "outside"]
"""How a value meets a threshold: the four orders, ``within`` (|x| <= threshold) and ``outside`` (|x| > it)."""
Transcribed = Literal["before the run", "after the run"]
"""When the claim was written into the table: before any run, or transcribed afterwards from the spec's header
(whose text, kept as ``text``, was committed before the runs)."""


class Reading(BaseModel):
    """What a claim reads per seed: ``arm``'s ``metric`` at ``step``, less ``from_step``'s or ``versus``'s."""

    model_config = TABLE
    text: Annotated[str, Field(min_length=1)]
    """The claim as written (for a transcribed one, the header's words)."""
    arm: Annotated[str, Field(min_length=1)]
    """A variant's name (``variant=`` is added when the exports are read), or a grid cell's whole label as its
    runs carry it (``train.estimator=gae_segment_local,variant=k8``: any name with ``=`` in it)."""
    metric: Annotated[str, Field(min_length=1)]
    step: Annotated[int, Field(ge=0)]
    statistic: Literal["value", "auc"] = "value"
    """``value``: the metric at ``step``; ``auc``: the area under its curve over the run's evaluations up to
    ``step``, divided by their step range (a mean level; the findings table's statistic)."""
    from_step: Annotated[int, Field(ge=0)] | None = None
    """Read the change since this step, per seed (``value`` only)."""
    versus: str | None = None
    """Read the difference from this arm (named as ``arm`` is; its value, or with ``from_step`` its change),
    paired by seed."""
    comparison: Comparison
    threshold: float
    transcribed: Transcribed

    @model_validator(mode="after")
    def _area_is_no_change(self) -> Reading:
        if self.statistic == "auc" and self.from_step is not None:
            raise ValueError("an area (`statistic = 'auc'`) is read from the first evaluation; leave out `from_step`")
        return self

    def reads(self) -> str:
        """What is read, in words: ``token: eval/...@80 - @0``, ``- segment``, ``(@80 - @0) - segment's`` or
        ``token: AUC of eval/... to @20 - segment``."""
        at = f"AUC of {self.metric} to @{self.step}" if self.statistic == "auc" else f"{self.metric}@{self.step}"
        if self.from_step is not None and self.versus is not None:
            return f"{self.arm}: {self.metric} (@{self.step} - @{self.from_step}) - {self.versus}'s"
        ref = f" - @{self.from_step}" if self.from_step is not None else f" - {self.versus}" if self.versus else ""
        return f"{self.arm}: {at}{ref}"


class Prediction(Reading):
    """A pre-registered prediction, per seed (``seeds`` must meet it) or on the mean (``seeds`` left out)."""

    id: Annotated[str, Field(min_length=1)]
    """Its number in the header (``1``, or ``1a`` and ``1b`` for the parts of one)."""
    seeds: Annotated[int, Field(ge=1)] | None = None
    p_below: Annotated[float, Field(gt=0, lt=1)] | None = None
    """With the mean: a paired t-test of the per-seed values against 0 must also give p below this."""

    @model_validator(mode="after")
    def _mean_or_seeds(self) -> Prediction:
        if self.seeds is not None and self.p_below is not None:
            raise ValueError("`p_below` reads the mean over seeds; leave out `seeds` with it")
        return self


class Precondition(Reading):
    """A condition the design needs before its predictions can test its mechanism (read on the mean)."""
