"""Every Lua script's header (its args, settings and keys lines) against its body and against
every Python caller in the tree: a caller that passes a field the script does not name, or
leaves out one it does, fails here before it ever reaches Redis."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import redis

from zkqueue.config import FLEET_VARS, Settings
from zkqueue.coordinator.transitions import PRELUDE_SETTINGS, SHARED_KEYS, Transitions, script_names, script_spec

ROOT = Path(__file__).resolve().parent.parent
PRELUDE_KEYS = {"job", "slot", "deadlines", "events", "routed", "checks"}
# Every Python file that may call a script (this one calls two wrongly on purpose, below).
SOURCES = [p for folder in ("coordinator", "tasks", "workers", "zkqueue", "tests", "bench")
           for p in (ROOT / folder).rglob("*.py") if p != Path(__file__).resolve()]


def _uses(body: str, table: str) -> set[str]:
    return set(re.findall(rf"\b{table}\.([a-z_][a-z0-9_]*)", body))


@pytest.mark.parametrize("name", script_names())
def test_header_names_exactly_what_the_body_reads(name):
    spec = script_spec(name)
    assert spec.body.startswith(f"-- {name}.lua: "), "the header starts by saying what the script does"
    assert _uses(spec.body, "A") == set(spec.args), "args: the arguments the script reads, all of them"
    assert _uses(spec.body, "S") <= set(spec.settings) | set(PRELUDE_SETTINGS)
    assert set(spec.settings) <= _uses(spec.body, "S"), "a setting named in the header is read"
    assert set(spec.settings) <= {v.field for v in FLEET_VARS}, "settings are fleet settings"
    assert _uses(spec.body, "K") <= set(spec.keys) | PRELUDE_KEYS
    assert set(spec.keys) <= _uses(spec.body, "K") and set(spec.keys) <= set(SHARED_KEYS)


def test_the_prelude_reads_only_what_every_script_gets():
    prelude = (ROOT / "coordinator" / "lua" / "prelude.lua").read_text()
    assert _uses(prelude, "S") <= set(PRELUDE_SETTINGS)
    assert _uses(prelude, "A") == set() and _uses(prelude, "K") <= PRELUDE_KEYS


def callers() -> list[tuple[str, int, str, set[str]]]:
    """(file, line, script, keyword names) of every `<x>.run("<script>", ...)` (or `_run`) in the tree."""
    names = set(script_names())
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("run", "_run")
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in names):
                assert all(k.arg for k in node.keywords), f"{path}:{node.lineno}: pass a script's fields by name"
                found.append((str(path.relative_to(ROOT)), node.lineno, node.args[0].value,
                              {k.arg for k in node.keywords}))
    return found


def test_every_caller_passes_exactly_the_scripts_fields():
    found = callers()
    wrong = [f"{where}:{line}: {name}.lua takes {sorted(script_spec(name).args)}, given {sorted(kw)}"
             for where, line, name, kw in found if kw != set(script_spec(name).args)]
    assert not wrong, "\n".join(wrong)
    unused = set(script_names()) - {name for _, _, name, _ in found}
    assert not unused, f"scripts nothing calls: {sorted(unused)}"


def test_run_refuses_unknown_and_missing_fields_before_redis():
    transitions = Transitions(redis.Redis(port=1), Settings())      # nothing is sent: the check comes first
    with pytest.raises(TypeError, match="refresh.lua takes token, worker; unknown lease"):
        transitions.run("refresh", "j", 0, token=1, worker="w", lease=5)
    with pytest.raises(TypeError, match="claim.lua takes .*; missing fingerprint, run_s"):
        transitions.run("claim", "j", 0, token=1, worker="w", pid=1)
