"""Fixtures shared with the other store-backed tests, and the real services of the scale-out tests."""

from tests.services import mlflow_server, optuna_db, postgres  # noqa: F401
from tests.stores import empty_mlflow_db, ready_stores, stores  # noqa: F401
