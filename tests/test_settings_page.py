"""docs/settings.md is the settings page the code generates, and it lists every setting a run resolves."""

from __future__ import annotations

from pathlib import Path

from simlab.analysis.settings_page import settings_markdown
from simlab.config import flatten, resolve

PAGE = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


def test_the_settings_page_is_what_the_code_generates() -> None:
    assert PAGE.read_text(encoding="utf-8") == settings_markdown(), \
        "docs/settings.md is stale: python -m simlab.analysis.settings_page > docs/settings.md"


def test_the_settings_page_lists_every_setting_of_every_task_family() -> None:
    page = PAGE.read_text(encoding="utf-8")
    for preset in ("keyrecall-tiny", "peekread-pos", "pointerchase-tiny"):
        keys = [k for k in flatten(resolve({"task": {"preset": preset}})) if k != "env_id"]
        missing = [k for k in keys if f"| `{k}`" not in page]
        assert not missing, f"{preset}: the page lacks {missing}"


def test_train_help_points_to_the_settings_page() -> None:
    from typer.testing import CliRunner

    from simlab.cli import app

    out = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0 and "docs/settings.md" in out.output
