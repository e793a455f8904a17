"""tests/device is no package: its helpers import one another by name, as run.sh runs them (PYTHONPATH=tests/device)."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
