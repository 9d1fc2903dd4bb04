"""The README and the pages under docs/: the two commands first, a README a newcomer reads in
minutes, links that resolve, commands that exist, every setting documented, every measured
figure with its command, date and machine."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from zkqueue import config

from test_config import variables_named

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 220
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
MACHINE = re.compile(r"\b(VM|H100|H200)\b")
COMMAND = re.compile(r"(^|`)(bash )?(bench/\S+|\./run-tests|tests/\S+\.py)", re.M)   # inline or a block's line


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def sections(text: str, level: str = "## ") -> dict[str, str]:
    """The page's sections by heading (the text up to the next heading of the same level)."""
    parts = re.split(rf"^{level}(.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def test_the_two_commands_come_first():
    readme = README.read_text()
    first = readme.split("```sh", 1)[1]
    assert first.lstrip().startswith("./demo") and "./run-tests" in first.split("```", 1)[0]


def test_the_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail under docs/ (at most {README_MAX_LINES})"


def test_every_relative_link_resolves():
    checked = 0
    for page in pages():
        for target, _anchor in LINK.findall(page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            checked += 1
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to {target}, which does not exist"
    assert checked >= 10, f"only {checked} relative links found: the link pattern no longer matches the pages"


def test_every_anchor_link_names_a_heading():
    def anchors(page: Path) -> set[str]:
        heads = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.M)
        return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}

    checked = 0
    for page in pages():
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", page.read_text()):
            linked = (page.parent / target) if target else page
            checked += 1
            assert anchor in anchors(linked), f"{page.relative_to(ROOT)}: #{anchor} is not a heading of {linked.name}"
    assert checked >= 3


def test_every_variable_is_in_the_operations_guide():
    section = sections((DOCS / "operations.md").read_text())["Configuration"]
    assert config.markdown_table() in section, "docs/operations.md's table is config.markdown_table()'s"
    missing = {n for n in variables_named() if f"`{n}`" not in section}
    assert not missing, f"docs/operations.md's Configuration section does not name {sorted(missing)}"


def test_every_measured_section_names_its_command_date_and_machine():
    found = sections((DOCS / "performance.md").read_text())
    assert len(found) >= 5, sorted(found)
    for title, body in found.items():
        assert DATE.search(body), f"performance.md '{title}' gives no date"
        assert MACHINE.search(body), f"performance.md '{title}' names no machine"
        assert COMMAND.search(body), f"performance.md '{title}' names no command"


def readme_commands() -> list[list[str]]:
    """`zkqueue SUBCOMMAND [SUB]` as the README's shell blocks show them."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S):
        for line in block.splitlines():
            m = re.match(r"\.venv/bin/zkqueue ([a-z-]+)(?: ([a-z-]+))?", line.strip())
            if m:
                out.append([w for w in m.groups() if w])
    return out


def test_the_readme_commands_exist():
    commands = readme_commands()
    assert len(commands) >= 10, commands
    zkqueue = Path(sys.executable).parent / "zkqueue"
    for words in commands:
        for n in (len(words), 1):   # `zkqueue quarantine list` or, where a sub-command takes no --help, its command
            proc = subprocess.run([zkqueue, *words[:n], "--help"], capture_output=True, text=True, timeout=60)
            if proc.returncode == 0:
                break
        assert proc.returncode == 0 and "usage" in (proc.stdout + proc.stderr).lower(), \
            f"`zkqueue {' '.join(words)} --help` failed: {proc.stdout}{proc.stderr}"


def test_a_bench_run_as_the_docs_write_it_runs_under_the_checkouts_venv(tmp_path):
    """The docs run benches as `bench/NAME`: its `#!/usr/bin/env python3` is the system
    Python, which lacks redis, psutil and the rest; bench/_venv.py runs the script again under
    .venv (this Python), and leaves a script run under any venv where it is."""
    system_python = Path(sys.base_prefix) / "bin" / "python3"
    if not system_python.exists() or sys.prefix == sys.base_prefix:
        pytest.skip("needs the suite to run in a venv made from a system Python")
    probe = tmp_path / "probe"      # a bench script's first lines (bench/ is a script's own folder)
    probe.write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'bench')!r})\n"
                     "import _venv  # noqa: F401\nprint(sys.prefix)\n")
    outside = subprocess.run([system_python, probe], capture_output=True, text=True, timeout=60)
    inside = subprocess.run([sys.executable, probe], capture_output=True, text=True, timeout=60)
    assert outside.returncode == 0 and outside.stdout.strip() == str(ROOT / ".venv"), outside
    assert inside.stdout.strip() == sys.prefix, inside


@pytest.mark.parametrize("page", ["operations.md", "performance.md", "gpu.md", "http-api.md", "architecture.md"])
def test_the_readme_links_every_page(page):
    assert f"](docs/{page})" in README.read_text()
