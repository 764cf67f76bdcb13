#!/usr/bin/env python3
"""One-command set-up for Headroom; needs nothing but Python 3.11+.

    python3 dev.py app    # create .venv, install Headroom, start the dashboard on the default scenario
    python3 dev.py test   # create .venv, install Headroom + test tools, run the whole test suite
    python3 dev.py lint   # the same install; ruff check, ruff format --check and pyright on planner/

Extra arguments after `app` go to `streamlit run` (e.g. `--server.port 8600`); after `test` to pytest
(e.g. `python3 dev.py test -k share`). Tests run in parallel (`-n auto`) unless you pass `-n`.
The install is skipped when pyproject.toml has not changed since the last one (a stamp in .venv);
delete .venv/headroom-install.json to force it.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / "headroom-install.json"
# The CPU build of this torch is what CI installs; a user with a GPU installs their normal torch
# first and it is kept (we only install torch when none is importable).
TEST_TORCH = "torch==2.13.0"
STOP_GRACE_SECONDS = 10.0


def run(*command: str | Path) -> None:
    print("+", " ".join(str(c) for c in command), flush=True)
    subprocess.run([str(c) for c in command], check=True, cwd=ROOT)


def ensure_venv() -> None:
    if not PYTHON.exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)


def has_module(name: str) -> bool:
    probe = subprocess.run([str(PYTHON), "-c", f"import {name}"], capture_output=True, cwd=ROOT)
    return probe.returncode == 0


def install_fingerprint() -> str:
    """What an install depends on: pyproject.toml (dependencies, packages) and the pinned test torch."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    digest.update(TEST_TORCH.encode())
    return digest.hexdigest()


def current_install() -> set[str] | None:
    """The extras of the last install, or None when there is none that is still current (pyproject.toml
    changed since, or the `headroom` script it made is gone)."""
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return None
    script = BIN / ("headroom.exe" if os.name == "nt" else "headroom")
    if not isinstance(stamp, dict) or stamp.get("fingerprint") != install_fingerprint() or not script.exists():
        return None
    return set(stamp.get("extras", []))


def install(extra: str | None) -> None:
    """`pip install -e .[extra]`, unless the last install covered it and pyproject.toml is unchanged."""
    done = current_install()
    if done is not None and (extra is None or extra in done):
        print(f"dev.py: Headroom is installed and pyproject.toml is unchanged; no pip run ({STAMP})", flush=True)
        return
    target = f".[{extra}]" if extra else "."
    if extra == "test" and not has_module("torch"):
        run(PYTHON, "-m", "pip", "install", "--quiet", TEST_TORCH)
    run(PYTHON, "-m", "pip", "install", "--quiet", "-e", target)
    extras = (done or set()) | ({extra} if extra else set())
    STAMP.write_text(json.dumps({"fingerprint": install_fingerprint(), "extras": sorted(extras)}) + "\n")


def _raise_exit(signum: int, _frame) -> None:
    raise SystemExit(128 + signum)


def serve(command: list[str]) -> int:
    """Run a server (Streamlit) as a child in its own process group and stop that whole group when this
    script ends for any reason: the server exits, Ctrl-C, SIGTERM/SIGHUP (`kill`, a closed terminal), or an
    error. On Linux the child also gets SIGTERM if this script is killed outright (PR_SET_PDEATHSIG)."""
    for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if signum is not None:
            signal.signal(signum, _raise_exit)
    print("+", " ".join(command), flush=True)
    if os.name == "posix":
        child = subprocess.Popen(command, cwd=ROOT, start_new_session=True, preexec_fn=_die_with_parent)
    else:
        child = subprocess.Popen(command, cwd=ROOT, creationflags=subprocess.CREATE_NEW_PROCESS_GROUP)
    try:
        return child.wait()
    finally:
        _stop(child)


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux for SIGTERM when the parent dies (no-op elsewhere)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM to the child's process group (Streamlit shuts down cleanly), SIGKILL if it lingers."""
    if child.poll() is not None:
        return
    if os.name == "posix":
        try:
            os.killpg(child.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
    else:
        child.terminate()
    try:
        child.wait(STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        if os.name == "posix":
            os.killpg(child.pid, signal.SIGKILL)
        else:
            child.kill()
        child.wait()


def chooses_workers(pytest_args: list[str]) -> bool:
    """Whether the pytest arguments already say how to use pytest-xdist (-n N, --numprocesses, -p no:xdist)."""
    for index, arg in enumerate(pytest_args):
        if arg.startswith(("-n", "--numprocesses", "-pno:xdist")):
            return True
        if arg == "-p" and pytest_args[index + 1 : index + 2] == ["no:xdist"]:
            return True
    return False


def run_tests(pytest_args: list[str]) -> int:
    # loadscope keeps each module's tests on one worker, so module-scoped fixtures (a live Streamlit server,
    # a browser) start once per module rather than once per worker.
    parallel = [] if chooses_workers(pytest_args) else ["-n", "auto", "--dist", "loadscope"]
    command = [str(PYTHON), "-m", "pytest", *parallel, *pytest_args]
    print("+", " ".join(command), flush=True)
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT)
    print(f"dev.py: the tests took {time.perf_counter() - start:.1f} s", flush=True)
    return result.returncode


def lint_commands() -> list[tuple[str, list[str]]]:
    """(name, command) of each check CI runs before the tests. The tools are the versions pinned in the
    `test` extra; pyright reads [tool.pyright] in pyproject.toml (planner/, standard mode) and resolves
    imports with the venv's Python."""
    python = str(PYTHON)
    return [
        ("ruff check", [python, "-m", "ruff", "check", "."]),
        ("ruff format", [python, "-m", "ruff", "format", "--check", "."]),
        ("pyright", [python, "-m", "pyright", "--pythonpath", python]),
    ]


def run_lint() -> int:
    """Run every check (all of them, even after a failure); one line per tool, the tool's own output
    after the line of one that failed. Non-zero when any failed."""
    # pyright-python would ask PyPI for a newer pyright on every run; the version is pinned on purpose.
    env = {**os.environ, "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1"}
    failed = []
    for name, command in lint_commands():
        start = time.perf_counter()
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        output = (result.stdout + result.stderr).strip()
        summary = output.splitlines()[-1].strip() if output else ""
        verdict = "ok" if result.returncode == 0 else f"FAILED (exit {result.returncode})"
        print(f"dev.py lint: {name}: {verdict}: {summary} ({time.perf_counter() - start:.1f} s)", flush=True)
        if result.returncode != 0:
            failed.append(name)
            print(output, flush=True)
    if failed:
        print(f"dev.py lint: failed: {', '.join(failed)}", flush=True)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("app", "test", "lint"):
        print(__doc__)
        return 2
    ensure_venv()
    if argv[0] == "app":
        install(None)
        return serve([str(PYTHON), "-m", "streamlit", "run", "app.py", *argv[1:]])
    install("test")
    if argv[0] == "lint":
        return run_lint()
    return run_tests(argv[1:])


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except subprocess.CalledProcessError as exc:
        sys.exit(exc.returncode)
    except KeyboardInterrupt:
        sys.exit(130)
