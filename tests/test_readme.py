"""The README's configuration table names every ZKQUEUE_* variable zkqueue reads."""

from __future__ import annotations

from test_compose import ROOT, variables_read

INTERNAL = {"ZKQUEUE_WORKER_ID", "ZKQUEUE_DEVICE", "ZKQUEUE_ALIVE_FILE"}   # set by `zkqueue worker` for its children


def test_every_variable_is_in_the_configuration_table():
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("`")[1] for line in table.splitlines() if line.startswith("| `ZKQUEUE_")}
    missing = variables_read() - INTERNAL - rows
    assert not missing, f"README's configuration table lacks {sorted(missing)}"


def test_the_two_commands_come_first():
    readme = (ROOT / "README.md").read_text()
    first = readme.split("```sh", 1)[1]
    assert first.lstrip().startswith("./demo") and "./run-tests" in first.split("```", 1)[0]
