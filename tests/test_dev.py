"""dev.py, the newcomer's path: parallel tests unless told otherwise, no pip run when nothing changed, and no
Streamlit left running when dev.py stops."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dev

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "args, chosen",
    [
        (["-q"], False),
        (["-k", "share", "tests/test_cli.py"], False),
        (["-n", "4"], True),
        (["-n4"], True),
        (["-nauto"], True),
        (["--numprocesses=2"], True),
        (["-p", "no:xdist"], True),
        (["-pno:xdist"], True),
        (["-p", "no:cacheprovider"], False),
    ],
)
def test_parallel_unless_the_user_chose(args, chosen):
    assert dev.chooses_workers(args) is chosen


@pytest.fixture
def project(tmp_path, monkeypatch):
    """dev.py pointed at a scratch project with a fake venv (a `headroom` script), recording pip runs."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    monkeypatch.setattr(dev, "ROOT", tmp_path)
    monkeypatch.setattr(dev, "BIN", bin_dir)
    monkeypatch.setattr(dev, "STAMP", tmp_path / ".venv" / "headroom-install.json")
    monkeypatch.setattr(dev, "has_module", lambda name: True)
    runs: list[tuple[str, ...]] = []

    def fake_run(*command):
        runs.append(tuple(str(c) for c in command))
        (bin_dir / "headroom").write_text("")  # what a real install leaves behind

    monkeypatch.setattr(dev, "run", fake_run)
    return tmp_path, runs


def test_install_runs_pip_once_until_pyproject_changes(project):
    root, runs = project
    dev.install(None)
    dev.install(None)
    assert [r[-1] for r in runs] == ["."]  # the second call found the stamp
    dev.install("test")  # the test extra was not installed yet
    dev.install(None)  # covered by the test install
    dev.install("test")
    assert [r[-1] for r in runs] == [".", ".[test]"]
    assert json.loads(dev.STAMP.read_text())["extras"] == ["test"]
    (root / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["numpy"]\n')
    dev.install(None)
    assert [r[-1] for r in runs] == [".", ".[test]", "."]


def test_install_runs_pip_when_the_install_is_gone(project):
    root, runs = project
    dev.install(None)
    (dev.BIN / "headroom").unlink()  # e.g. `pip uninstall headroom`
    dev.install(None)
    assert len(runs) == 2


def test_lint_runs_every_check_and_fails_on_any(monkeypatch, capsys):
    """ruff check, ruff format --check and pyright all run, even after one fails; one line per tool."""
    names = [name for name, _ in dev.lint_commands()]
    assert names == ["ruff check", "ruff format", "pyright"]
    assert all(command[:2] == [str(dev.PYTHON), "-m"] for _, command in dev.lint_commands())
    calls: list[list[str]] = []

    def fake_run(command, **kwargs):
        calls.append(command)
        failing = command[2] == "ruff" and command[3] == "format"
        out = "1 file would be reformatted\n" if failing else "All checks passed!\n"
        return subprocess.CompletedProcess(command, 1 if failing else 0, stdout=out, stderr="")

    monkeypatch.setattr(dev.subprocess, "run", fake_run)
    assert dev.run_lint() == 1
    assert len(calls) == 3
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("dev.py lint: ")]
    assert [line.split(": ")[1] for line in lines[:3]] == names
    assert "ruff format: FAILED (exit 1): 1 file would be reformatted" in lines[1]
    assert lines[-1] == "dev.py lint: failed: ruff format"

    monkeypatch.setattr(
        dev.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(command, 0, "ok\n", "")
    )
    assert dev.run_lint() == 0


DRIVER = """
import sys
import dev
child = "import os, time; print(os.getpid(), flush=True); time.sleep(120)"
sys.exit(dev.serve([sys.executable, "-c", child]))
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc (Linux)")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL])
def test_the_server_stops_with_dev_py(signum):
    """Whatever ends dev.py (kill, Ctrl-C, a closed terminal, even SIGKILL), its server child goes too."""
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert driver.stdout is not None
    driver.stdout.readline()  # dev.py echoes the command
    server = int(driver.stdout.readline())
    assert _alive(server)
    driver.send_signal(signum)
    driver.wait(timeout=60)
    deadline = time.monotonic() + 20
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(server)
    if alive:
        os.kill(server, signal.SIGKILL)
    assert not alive
