"""The README leads with the two commands: the demo and the tests."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_two_commands_come_first():
    readme = (ROOT / "README.md").read_text()
    first = readme.split("```sh", 1)[1]
    assert first.lstrip().startswith("./demo") and "./run-tests" in first.split("```", 1)[0]
