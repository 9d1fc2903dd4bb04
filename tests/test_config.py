"""One configuration module: it alone reads the environment, every ZKQUEUE_* name in the tree
is in the README, fleet settings are checked together, and the packages import without a cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from zkqueue import config
from zkqueue.config import ConfigError, ProcessSettings, Settings

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"zkqueue": ROOT / "zkqueue", "zkqueue.groth16": ROOT / "groth16",
            "zkqueue.coordinator": ROOT / "coordinator", "zkqueue.tasks": ROOT / "tasks",
            "zkqueue.workers": ROOT / "workers", "zkqueue.api": ROOT / "api"}
# Entry points may set variables for what they start (Flower's FLOWER_*, OpenBLAS's thread
# count); they read settings through zkqueue.config like everyone else.
ENTRY_POINTS = {"zkqueue/cli.py", "groth16/cli.py", "groth16/witness/cli.py", "tasks/main.py"}
NAME = re.compile(r"ZKQUEUE_[A-Z0-9_]+")


def modules() -> dict[str, Path]:
    """Every module of the installed package, by dotted name."""
    out = {}
    for package, folder in PACKAGES.items():
        for py in folder.rglob("*.py"):
            parts = py.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts))
            out[name.removesuffix(".__init__")] = py
    return out


def _environ_uses(tree: ast.AST):
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
    offenders = []
    for name, py in modules().items():
        rel = str(py.relative_to(ROOT))
        if rel == "zkqueue/config.py":
            continue
        for line, write in _environ_uses(ast.parse(py.read_text())):
            if not (write and rel in ENTRY_POINTS):
                offenders.append(f"{rel}:{line}")
    assert not offenders, f"read settings through zkqueue.config, not os.environ: {offenders}"


def variables_named() -> set[str]:
    """Every ZKQUEUE_* name the installed code, the scripts, the benches and the images use,
    however it is read (the settings table builds most names from field names)."""
    names = {v.env for v in config.ALL_VARS}
    sources = [*(p for folder in PACKAGES.values() for p in folder.rglob("*.py")),
               *(ROOT / "scripts").iterdir(), *(ROOT / "bench").iterdir(), ROOT / "Dockerfile", ROOT / "compose.yaml"]
    for path in sources:
        if path.is_file():
            names |= set(NAME.findall(path.read_text(errors="replace")))
    return names


def test_every_variable_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    assert config.markdown_table() in section, "the README's table is config.markdown_table()'s"
    missing = {n for n in variables_named() if f"`{n}`" not in section}
    assert not missing, f"README's Configuration section does not name {sorted(missing)}"


def test_the_scan_finds_names_read_through_the_table():
    names = variables_named()
    assert {"ZKQUEUE_REDIS_URL", "ZKQUEUE_CUDA_EMULATION", "ZKQUEUE_FLOWER_AUTH", "ZKQUEUE_BENCH_FIXTURES"} <= names
    assert "ZKQUEUE_NOT_A_SETTING" not in names


def test_settings_read_the_environment_once_with_flags_first():
    env = {"ZKQUEUE_LEASE_TTL_S": "9", "ZKQUEUE_REDIS_URL": "redis://env:6379/0", "ZKQUEUE_THREADS": "3",
           "ZKQUEUE_TASK_EVENTS": "0", "HOME": "/home/someone"}
    s = Settings.from_env(env, redis_url="redis://flag:6379/0")
    assert s.lease_ttl_s == 9.0 and s.redis_url == "redis://flag:6379/0" and s.lease_refresh_s == 2.25
    p = ProcessSettings.from_env(env)
    assert p.threads == 3 and p.task_events is False and p.cache_dir == "/home/someone/.cache/zkqueue"
    assert p.wasm_cache == "/home/someone/.cache/zkqueue/wasm"
    with pytest.raises(AttributeError):
        s.lease_ttl_s = 1
    assert s.replace(lease_ttl_s=12).lease_ttl_s == 12 and s.lease_ttl_s == 9


@pytest.mark.parametrize("env, message", [
    ({"ZKQUEUE_LEASE_TTL_S": "six"}, "ZKQUEUE_LEASE_TTL_S='six' is not a number"),
    ({"ZKQUEUE_MAX_ATTEMPTS": "2.5"}, "ZKQUEUE_MAX_ATTEMPTS='2.5' is not an integer"),
    ({"ZKQUEUE_TASK_TIME_LIMIT_S": "4000"}, "must be below the Redis visibility_timeout_s"),
    ({"ZKQUEUE_HEARTBEAT_INTERVAL_S": "5"}, "heartbeat_interval_s must be below heartbeat_ttl_s"),
])
def test_bad_settings_say_what_is_wrong(env, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        Settings.from_env(env)


def test_a_switch_is_zero_or_one():
    with pytest.raises(ConfigError, match="ZKQUEUE_CUDA_EMULATION='yes' is not 0 or 1"):
        ProcessSettings.from_env({"ZKQUEUE_CUDA_EMULATION": "yes"})


def test_a_child_gets_what_this_process_was_given():
    s = Settings.from_env({}, redis_url="redis://flag:6379/0")
    env = config.child_environ(s, ProcessSettings.from_env({}, threads=2))
    assert Settings.from_env(env) == s
    assert ProcessSettings.from_env(env).threads == 2


def _imports(name: str, py: Path, known: set[str]) -> set[str]:
    """The package modules `name` imports, at module level or inside functions (a lazy import
    is an arrow all the same); `if TYPE_CHECKING:` blocks do not count."""
    tree = ast.parse(py.read_text())
    package = name if py.name == "__init__.py" else name.rpartition(".")[0]
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
               and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    found = set()
    for stmt in ast.walk(tree):
        if id(stmt) in skipped:
            continue
        if isinstance(stmt, ast.Import):
            found |= {a.name for a in stmt.names}
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - stmt.level + 1] + ([base] if base else []))
            # `from pkg import module` depends on that module; `from pkg import name`, on pkg.
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in stmt.names}
    return {m for m in found if m in known and m != name}


def test_no_import_cycle():
    mods = modules()
    graph = {name: _imports(name, py, set(mods)) for name, py in mods.items()}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for name in sorted(graph):
        if name not in state and (cycle := visit(name)):
            pytest.fail(f"import cycle: {' -> '.join(cycle)}")
