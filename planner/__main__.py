"""`python -m planner`: runs the CLI. The CLI lives in `planner.cli` so that it is imported once,
under its own name, whichever way it is started (a `-m` module runs as `__main__`, a second copy)."""

import sys

from planner.cli.main import main

sys.exit(main())
