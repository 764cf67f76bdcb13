"""`pip install headroom` ships the whole dashboard: the wheel holds planner/, ui/ and headroom_dashboard/ (app.py,
app_pages/, .streamlit/config.toml), and `headroom app` starts it from there, without the source tree."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
# Not packages of the repository: the dashboard's mapped folder, and the catalog's data-only folder.
MAPPED = {"headroom_dashboard.app_pages": ROOT / "app_pages", "planner.model.configs": ROOT / "planner/model/configs"}


def _source_packages() -> set[str]:
    found = {p.parent.relative_to(ROOT).as_posix().replace("/", ".") for p in ROOT.glob("planner/**/__init__.py")}
    return found | {"ui"}


def test_every_package_is_listed():
    """The package list is explicit (setuptools cannot `find` a mapped package): a new subpackage must be added."""
    listed = set(SETUPTOOLS["packages"])
    missing = _source_packages() - listed
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages in pyproject.toml"
    for name in listed - _source_packages():
        assert MAPPED[name].is_dir(), name


def test_package_data_globs_match_files():
    for package, patterns in SETUPTOOLS["package-data"].items():
        folder = MAPPED.get(package) or ROOT / package.replace(".", "/")
        for pattern in patterns:
            assert list(folder.glob(pattern)), f"{package}: {pattern} matches nothing"


def _expected_wheel_files() -> set[str]:
    """What the wheel must hold, listed from the source tree itself."""
    files = {p.relative_to(ROOT).as_posix() for p in ROOT.glob("planner/**/*.py") if "__pycache__" not in p.parts}
    files |= {p.relative_to(ROOT).as_posix() for p in ROOT.glob("ui/*.py")}
    for pattern in SETUPTOOLS["package-data"]["planner"]:
        files |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "planner").glob(pattern)}
    files |= {f"headroom_dashboard/app_pages/{p.name}" for p in (ROOT / "app_pages").glob("*.py")}
    return files | {"headroom_dashboard/app.py", "headroom_dashboard/.streamlit/config.toml"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the source tree (no build isolation: the test venv's setuptools)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    skip = (".venv", ".git", "tests", "test-artifacts", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*skip, ".hypothesis"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(source), "-w", str(tmp)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = tmp.glob("headroom-*.whl")
    return built


@pytest.mark.slow
def test_wheel_holds_engine_ui_and_dashboard(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = archive.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    payload = {n for n in names if ".dist-info/" not in n}
    assert payload == _expected_wheel_files()  # dev.py, tests/, benchmarks/ stay out
    assert "headroom = planner.cli.main:main" in entry_points
    assert "Requires-Dist: streamlit>=1.59" in metadata


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_headroom_app_runs_the_installed_dashboard(wheel, tmp_path):
    """Unpacked wheel on PYTHONPATH, started from a folder without the sources: the dashboard answers."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    located = subprocess.run(
        [sys.executable, "-c", "from planner.cli.main import dashboard_script; print(dashboard_script())"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=True,
    )
    assert Path(located.stdout.strip()) == site / "headroom_dashboard" / "app.py"

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "planner", "app", "--server.headless", "true", "--server.port", str(port)],
        cwd=tmp_path,
        env={**env, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        health = ""
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                    health = response.read().decode()
                break
            except OSError:
                time.sleep(0.5)
        failure = server.stderr.read().decode() if server.stderr and server.poll() is not None else "no answer"
        assert health == "ok", failure
    finally:
        server.terminate()  # `app` exec'd Streamlit, so this is the server itself
        server.wait(timeout=30)
