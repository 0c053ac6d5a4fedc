"""Fixtures shared with the other store-backed tests."""

from tests.stores import empty_mlflow_db  # noqa: F401
