"""Every structural rule of the tree, checked on the code itself (docs/architecture.md is the map):

- the arrows: each package imports only what the table in docs/architecture.md allows, read
  from that table, with lazy (inside a function) and type-only (`if TYPE_CHECKING:`) imports
  counted like any other, on the real module names (`zkqueue.coordinator.client`, ...);
- no import cycle between modules, type-only imports included;
- zkqueue/config.py is the one reader of the environment;
- the entry points: which modules run as programs, and how each is started;
- the source folders are imported by their installed names only, and are the packages
  pyproject.toml installs.

Each rule first asserts that it saw what it checks (the modules, their imports, the table's
rows), so that a rule that matches nothing fails instead of passing.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The source folders and the import names they are installed under (pyproject.toml maps them).
FOLDERS = {"groth16": "zkqueue.groth16", "coordinator": "zkqueue.coordinator", "tasks": "zkqueue.tasks",
           "workers": "zkqueue.workers", "api": "zkqueue.api", "zkqueue": "zkqueue"}


# ---- the modules and their imports --------------------------------------------------------

def modules() -> dict[str, Path]:
    """Every module of the installed package, by its dotted name."""
    out = {}
    for folder, package in FOLDERS.items():
        for py in (ROOT / folder).rglob("*.py"):
            parts = py.relative_to(ROOT / folder).with_suffix("").parts
            out[".".join((package, *parts)).removesuffix(".__init__")] = py
    return out


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to a dotted name."""

    target: str          # a module of the tree when `from pkg import module`, else what was named
    line: int
    how: str             # "module level", "lazy" (inside a function) or "type-only"


def _type_only_nodes(tree: ast.AST) -> set[int]:
    return {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}


def _lazy_nodes(tree: ast.AST) -> set[int]:
    return {id(n) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for n in ast.walk(node)}


def imports_of(name: str, py: Path, known: set[str]) -> list[Import]:
    """Every import in module `name` (file `py`), wherever it stands. `from pkg import x`
    names the module pkg.x when that is a module of the tree, else pkg itself."""
    tree = ast.parse(py.read_text(), str(py))
    package = name if py.name == "__init__.py" else name.rpartition(".")[0]
    type_only, lazy = _type_only_nodes(tree), _lazy_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        how = "type-only" if id(node) in type_only else "lazy" if id(node) in lazy else "module level"
        found += [Import(t, node.lineno, how) for t in targets]
    return found


def import_graph() -> dict[str, list[Import]]:
    mods = modules()
    return {name: imports_of(name, py, set(mods)) for name, py in mods.items()}


# ---- the arrows, as docs/architecture.md states them ----------------------------------------

@dataclass
class Arrow:
    """One row of the table: `package` may import `allowed` (zkqueue's own packages; None:
    every package) and never `forbidden` (third-party); `stdlib_only`: nothing else at all."""

    package: str
    allowed: set[str] | None
    forbidden: set[str] = field(default_factory=set)
    stdlib_only: bool = False


def arrows_table() -> dict[str, Arrow]:
    """The table under "Packages and their arrows" in docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Packages and their arrows", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table = {}
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        package = re.fullmatch(r"`([\w.]+)`", cells[0]).group(1)
        named = set(re.findall(r"`([\w.]+)`", cells[1]))
        table[package] = Arrow(package, None if "every package" in cells[1] else named,
                               set(re.findall(r"`([\w.]+)`", cells[2])),
                               stdlib_only="standard library only" in cells[1])
    return table


def unit_of(module: str, units) -> str:
    """The table's row a module belongs to: the longest row name it is, or is inside."""
    return max((u for u in units if module == u or module.startswith(u + ".")), key=len)


def test_the_arrows_table_names_every_package_and_points_one_way():
    table = arrows_table()
    assert {"zkqueue.config", "zkqueue.groth16", "zkqueue.coordinator", "zkqueue.workers", "zkqueue.tasks",
            "zkqueue.api", "zkqueue.cli", "zkqueue"} <= set(table), sorted(table)
    # every row's module(s) exist, and every module belongs to a row
    mods = modules()
    for unit in table:
        assert any(m == unit or m.startswith(unit + ".") for m in mods), f"no module for row {unit}"
    # the table itself is acyclic (zkqueue.cli, allowed everything, is imported by no row)
    edges = {u: (a.allowed if a.allowed is not None else set(table) - {u}) for u, a in table.items()}
    assert all(u not in allowed for u, allowed in edges.items())
    order: list[str] = []
    pending = dict(edges)
    while pending:
        ready = [u for u, deps in pending.items() if deps <= set(order) | {d for d in deps if d not in table}]
        assert ready, f"the arrows table has a cycle among {sorted(pending)}"
        order += ready
        for u in ready:
            del pending[u]


def test_every_import_follows_the_arrows_of_the_map():
    """Each package imports only what docs/architecture.md's table allows: `coordinator`
    neither `workers`, `tasks` nor `api`, even lazily; nothing imports `tasks` or the CLI ..."""
    table = arrows_table()
    graph = import_graph()
    checked = {u: 0 for u in table}
    offenders = []
    for module, found in graph.items():
        unit = unit_of(module, table)
        arrow = table[unit]
        for imp in found:
            top = imp.target.split(".")[0]
            if top == "zkqueue":
                target = unit_of(imp.target, table) if imp.target != "zkqueue" else "zkqueue"
                if target == unit:
                    continue
                checked[unit] += 1
                if arrow.allowed is not None and target not in arrow.allowed:
                    offenders.append(f"{module}:{imp.line} imports {imp.target} ({imp.how}): "
                                     f"{unit} may import {sorted(arrow.allowed) or 'no zkqueue package'}")
            else:
                if arrow.stdlib_only and top not in sys.stdlib_module_names and top != "__future__":
                    offenders.append(f"{module}:{imp.line} imports {imp.target}: {unit} uses the standard library only")
                if top in arrow.forbidden:
                    offenders.append(f"{module}:{imp.line} imports {imp.target} ({imp.how}): {unit} never imports {top}")
    # Non-vacuous: the scan saw each row's modules importing the packages their row allows.
    for unit, arrow in table.items():
        if arrow.allowed is None or arrow.allowed:
            assert checked[unit] > 0, f"no import of another zkqueue package seen in {unit}: is the scan blind?"
    assert sum(checked.values()) > 50, checked
    assert not offenders, "imports against docs/architecture.md's arrows:\n" + "\n".join(offenders)


def test_importing_a_package_loads_only_what_its_arrows_allow():
    """The same rules, seen from a running process: the proving core loads neither Celery nor
    Redis; the client library (and the CLI module itself) loads neither the worker runtime,
    the tasks nor the HTTP API; the HTTP API loads neither the tasks nor the workers."""
    code = """
import sys
def loaded(prefixes):
    return sorted(m for m in sys.modules if m.split(".")[0] in prefixes or m.startswith(tuple(p + "." for p in prefixes)))
import zkqueue.groth16.prover, zkqueue.groth16.formats.zkey, zkqueue.groth16.verifier
assert "zkqueue.groth16.prover" in sys.modules
bad = loaded(("celery", "redis", "kombu")); assert not bad, ("groth16 loaded", bad)
import zkqueue.coordinator.client, zkqueue.coordinator.reaper, zkqueue.coordinator.scheduler, zkqueue.cli
assert {"zkqueue.coordinator.client", "zkqueue.cli", "redis"} <= set(sys.modules)
bad = loaded(("zkqueue.tasks", "zkqueue.workers", "zkqueue.api", "starlette", "uvicorn"))
assert not bad, ("coordinator loaded", bad)
import zkqueue.api.app, zkqueue.api.server
assert "zkqueue.api.app" in sys.modules and "starlette" in sys.modules
bad = loaded(("zkqueue.tasks", "zkqueue.workers")); assert not bad, ("api loaded", bad)
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


# ---- no import cycle -------------------------------------------------------------------------

def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (or a module importing
    itself), as a sorted list: each holds at least one cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []

    def connect(v: str) -> None:   # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_no_import_cycle_even_through_type_only_imports():
    graph = import_graph()
    edges = {m: {i.target for i in found if i.target in graph and i.target != m} for m, found in graph.items()}
    # Non-vacuous: the graph holds the imports of every kind, type-only ones included.
    kinds = {i.how for found in graph.values() for i in found if i.target in graph}
    assert kinds == {"module level", "lazy", "type-only"}, kinds
    assert sum(map(len, edges.values())) > 100
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]   # the finder finds
    cycles = find_cycles(edges)
    assert not cycles, "import cycles (modules that import each other, directly or around a loop):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


# ---- the environment -------------------------------------------------------------------------

# The command-line modules may set variables for what they start (Flower's FLOWER_*, OpenBLAS's
# thread count); they read settings through zkqueue.config like everyone else.
MAY_WRITE_THE_ENVIRONMENT = {"zkqueue.cli", "zkqueue.groth16.cli", "zkqueue.groth16.witness.cli"}


def environ_uses(tree: ast.AST):
    """(line, is_write) of every use of os.environ / os.getenv in a module."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
                and node.attr in ("environ", "getenv", "environb")):
            continue
        parent = parents.get(node)
        write = (isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store)) or (
            isinstance(parent, ast.Attribute) and parent.attr == "setdefault")
        yield node.lineno, write


def test_only_the_configuration_module_reads_the_environment():
    offenders, seen = [], {}
    for name, py in modules().items():
        uses = list(environ_uses(ast.parse(py.read_text())))
        seen[name] = uses
        if name == "zkqueue.config":
            continue
        offenders += [f"{py.relative_to(ROOT)}:{line}" for line, write in uses
                      if not (write and name in MAY_WRITE_THE_ENVIRONMENT)]
    # Non-vacuous: the scan sees config.py's reads, and the writes the command lines may make.
    assert any(not write for _, write in seen["zkqueue.config"]), "the scan found no read in zkqueue/config.py"
    assert any(write for m in MAY_WRITE_THE_ENVIRONMENT for _, write in seen[m])
    assert not offenders, f"read settings through zkqueue.config, not os.environ: {offenders}"


# ---- the entry points ------------------------------------------------------------------------

# Every module that runs as a program, and what starts it.
ENTRY_POINTS = {
    "zkqueue.cli": "the `zkqueue` command (scripts/zkqueue, installed by pyproject.toml's script-files)",
    "zkqueue.tasks.main": "one worker process per device, started by `zkqueue worker` (workers/spawn.py)",
    "zkqueue.groth16.cli": "`python -m zkqueue.groth16.cli`: the proving core's commands without the queue",
    "zkqueue.groth16.backends.cuda_compile": "the GPU image's build step (Dockerfile) compiling cubins",
    "zkqueue.workers.canary": "a worker's start-up canary proof, in a process of its own (tasks/main.py)",
}


def _runs_as_a_program(py: Path) -> bool:
    return any(isinstance(node, ast.If) and ast.unparse(node.test) in ('__name__ == "__main__"',
                                                                      "__name__ == '__main__'")
               for node in ast.parse(py.read_text()).body)


def test_the_entry_points_are_the_ones_named_and_nothing_imports_them():
    mods = modules()
    programs = {name for name, py in mods.items() if _runs_as_a_program(py)}
    assert programs == set(ENTRY_POINTS)
    # The `zkqueue` command is scripts/zkqueue, a plain script running zkqueue.cli's main.
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert tool["tool"]["setuptools"]["script-files"] == ["scripts/zkqueue"]
    assert "scripts" not in tool["project"]
    script = ast.parse((ROOT / "scripts" / "zkqueue").read_text())
    assert [(n.module, [a.name for a in n.names]) for n in script.body if isinstance(n, ast.ImportFrom)] == [
        ("zkqueue.cli", ["main"])]
    # A worker process is `python -m zkqueue.tasks.main`, which the supervisor starts.
    assert '"-m", "zkqueue.tasks.main"' in (ROOT / "workers" / "spawn.py").read_text()
    # The product's two programs parse their arguments and start what they run; the runtime
    # they start lives in the packages (zkqueue.tasks.main defines no class: workers/process.py).
    for program in ("zkqueue.cli", "zkqueue.tasks.main"):
        tree = ast.parse(mods[program].read_text())
        assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body), program
        assert not [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)], program
    # No module of the tree imports the two programs of the product (the CLI, a worker).
    graph = import_graph()
    importers = {f"{m}:{i.line}" for m, found in graph.items() for i in found
                 if i.target in ("zkqueue.cli", "zkqueue.tasks.main")}
    assert sum(len(found) for found in graph.values()) > 100
    assert not importers, importers


def test_the_worker_runtime_lives_in_workers_and_tasks_holds_only_the_tasks():
    """tasks/ is the Celery app, its tasks, their per-process context and the entry point;
    what runs beside Celery in a worker (heartbeat, liveness, the watches, the signal wiring)
    is workers/process.py's, and the exit statuses are workers/exit_codes.py's."""
    mods = modules()

    def classes(package: str) -> set[str]:
        return {f"{m.removeprefix(package + '.')}.{n.name}" for m, py in mods.items() if m.startswith(package + ".")
                for n in ast.walk(ast.parse(py.read_text())) if isinstance(n, ast.ClassDef)}
    assert classes("zkqueue.tasks") == {"context.Identity", "context.Context"}
    assert {"process.WorkerRuntime", "process.SupervisorWatch", "process.QueueLink",
            "exit_codes.ExitCode", "spawn.Supervisor"} <= classes("zkqueue.workers")
    # No bare exit status on either side of the table: the worker and the supervisor name ExitCode.
    for program in ("zkqueue.tasks.main", "zkqueue.workers.spawn"):
        tree = ast.parse(mods[program].read_text())
        returned = [(n.lineno, v) for n in ast.walk(tree) if isinstance(n, ast.Return) and n.value is not None
                    for v in (n.value.elts if isinstance(n.value, ast.Tuple) else [n.value])]
        bare = [line for line, v in returned if isinstance(v, ast.Constant) and type(v.value) is int]
        bare += [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Compare)
                 and any(isinstance(c, ast.Constant) and c.value == 2 for c in n.comparators)]
        assert "ExitCode." in mods[program].read_text() and not bare, (program, bare)


# ---- the source folders and their installed names -----------------------------------------

def python_sources() -> list[Path]:
    """Every Python file of the project, including the extension-less scripts under bench/ and scripts/."""
    files = [p for p in ROOT.rglob("*.py") if not {".venv", ".interop", "node_modules"} & set(p.parts)]
    for folder in ("bench", "scripts"):
        files += [p for p in (ROOT / folder).iterdir()
                  if p.is_file() and not p.suffix and p.read_bytes().startswith(b"#!/usr/bin/env python")]
    return files


def test_nothing_imports_the_source_folders_by_their_own_names():
    """The folders are installed beneath `zkqueue` (pyproject.toml maps them): importing one
    by its folder name would work from a checkout and break installed."""
    offenders, scanned = [], set()
    for path in python_sources():
        scanned.add(path.relative_to(ROOT).parts[0])
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names
                          if n.split(".")[0] in FOLDERS and n.split(".")[0] != "zkqueue"]
    assert set(FOLDERS) | {"tests", "bench", "scripts"} <= scanned, scanned
    assert not offenders, "imports by folder name instead of zkqueue.*:\n" + "\n".join(offenders)


def folder_of(package: str) -> Path:
    """The checkout's folder of an installed package name (zkqueue.groth16.kernels: groth16/kernels)."""
    top, _, rest = package.removeprefix("zkqueue.").partition(".")
    if top in FOLDERS and top != "zkqueue":
        return ROOT.joinpath(top, *filter(None, rest.split(".")))
    return ROOT.joinpath("zkqueue", *package.removeprefix("zkqueue.").split("."))


def test_every_package_folder_is_listed_in_pyproject():
    """pyproject.toml installs every folder with an __init__.py and every folder of data files
    (each as a package of its own, as setuptools asks: listed, it builds without a warning),
    and a checkout maps the same folders (zkqueue/_checkout.py)."""
    from zkqueue import _checkout
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *rel)))
    assert len(found) >= len(FOLDERS)
    data = tool["package-data"]
    for package, patterns in data.items():
        folder = folder_of(package)
        assert not (folder / "__init__.py").exists() and all(list(folder.glob(p)) for p in patterns), (package, folder)
    # every folder holding non-Python files the code reads is one of those
    holders = {p.parent for folder in FOLDERS for p in (ROOT / folder).rglob("*")
               if p.is_file() and p.suffix in (".lua", ".cu", ".cuh", ".cpp", ".hpp", ".zkey", ".wtns", ".json")}
    assert holders == {folder_of(p) for p in data} and len(data) >= 4, sorted(map(str, holders))
    assert set(tool["packages"]) == found | set(data)
    assert tool["package-dir"] == {v: k for k, v in FOLDERS.items() if k != "zkqueue"}
    assert set(_checkout.FOLDERS) == set(tool["package-dir"].values())
