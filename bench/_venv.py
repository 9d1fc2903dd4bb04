"""Imported first by the bench scripts: run as `bench/NAME` by a Python outside any venv, a
script runs itself again under the checkout's `.venv` (scripts/setup.sh makes it), which
holds what it imports (redis, psutil, httpx, ...). Under any venv (the checkout's, or the one
bench/gpu_check.sh makes on a GPU machine) nothing happens."""

import os
import sys
from pathlib import Path

_PYTHON = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python"

if sys.prefix == sys.base_prefix and _PYTHON.exists():
    os.execv(_PYTHON, [str(_PYTHON), *sys.argv])
