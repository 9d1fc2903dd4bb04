"""Imports a checkout's source folders as zkqueue's subpackages.

The folders groth16/, coordinator/, tasks/, workers/ and api/ sit at the top of the
repository, beside zkqueue/; a wheel installs them beneath zkqueue (pyproject.toml's
package-dir). Run from a checkout (scripts/setup.sh puts the checkout on the .venv's path
with a plain .pth line; tests run from the repository), zkqueue/__init__.py installs this
finder, so `zkqueue.groth16` is the checkout's groth16/ and an edit takes effect at once.

It stands in for setuptools' editable finder, which its .pth file imports at every start of
every Python in the venv, with pathlib, re and enum (about 9 ms of each `zkqueue prove`,
whose start-up avoids those modules); this one is loaded only with zkqueue, and loads
importlib.machinery alone.
"""

from __future__ import annotations

import sys
from importlib.machinery import PathFinder

# pyproject.toml's [tool.setuptools.package-dir], folder by folder (tests/test_architecture.py
# checks that the two agree).
FOLDERS = ("groth16", "coordinator", "tasks", "workers", "api")


class CheckoutFinder:
    """Finds `zkqueue.<folder>` as `<root>/<folder>`; their own submodules then follow their
    package's __path__ as usual. Consulted only after the usual finders found nothing."""

    def __init__(self, root: str):
        self.root = root

    def find_spec(self, fullname: str, path=None, target=None):
        package, _, folder = fullname.rpartition(".")
        if package != "zkqueue" or folder not in FOLDERS:
            return None
        return PathFinder.find_spec(fullname, [self.root])


def install(root: str) -> None:
    """Makes the folders under `root` (the checkout) importable beneath zkqueue, once."""
    if not any(isinstance(f, CheckoutFinder) for f in sys.meta_path):
        sys.meta_path.append(CheckoutFinder(root))
