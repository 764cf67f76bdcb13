#!/usr/bin/env python3
"""One-command set-up for Headroom; needs nothing but Python 3.11+.

    python3 dev.py app    # create .venv, install Headroom, start the dashboard on the default scenario
    python3 dev.py test   # create .venv, install Headroom + test tools, run the whole test suite

Extra arguments after `test` go to pytest (e.g. `python3 dev.py test -k share`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
# The CPU build of this torch is what CI installs; a user with a GPU installs their normal torch
# first and it is kept (we only install torch when none is importable).
TEST_TORCH = "torch==2.13.0"


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


def install(extra: str | None) -> None:
    target = f".[{extra}]" if extra else "."
    if extra == "test" and not has_module("torch"):
        run(PYTHON, "-m", "pip", "install", "--quiet", TEST_TORCH)
    run(PYTHON, "-m", "pip", "install", "--quiet", "-e", target)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("app", "test"):
        print(__doc__)
        return 2
    ensure_venv()
    if argv[0] == "app":
        install(None)
        run(PYTHON, "-m", "streamlit", "run", "app.py", *argv[1:])
        return 0
    install("test")
    result = subprocess.run([str(PYTHON), "-m", "pytest", *argv[1:]], cwd=ROOT)
    return result.returncode


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except subprocess.CalledProcessError as exc:
        sys.exit(exc.returncode)
    except KeyboardInterrupt:
        sys.exit(130)
