"""AppTest helpers: open a page of the dashboard (optionally from a share link's parameters)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "app.py"
TIMEOUT = 60

# Calibration records live in a per-user data directory, and the active one applies to every plan: the app
# tests get an empty one of their own (tests that need a record write it there and clean up).
DATA_DIR = Path(tempfile.mkdtemp(prefix="headroom-apptest-"))
os.environ["HEADROOM_DATA_DIR"] = str(DATA_DIR)
atexit.register(shutil.rmtree, DATA_DIR, ignore_errors=True)


def open_page(page: str = "inference", params: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if page != "inference":
        at.switch_page(f"app_pages/{page}.py")
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    return at


def metric(at: AppTest, label: str) -> str:
    for item in at.metric:
        if item.label == label:
            return item.value
    raise AssertionError(f"no metric {label!r}; have {[m.label for m in at.metric]}")


def warnings_text(at: AppTest) -> str:
    """All warnings, Markdown escapes removed."""
    return "\n".join(w.value for w in at.warning).replace("\\", "")


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.fixture
def page():
    return open_page
