"""One configuration module: every ZKQUEUE_* name in the tree is in the operations guide
(tests/test_readme.py), settings are read once with flags first, and fleet settings are checked
together. (That it alone reads the environment is a rule of tests/test_architecture.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from zkqueue import config
from zkqueue.config import ConfigError, ProcessSettings, Settings

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"zkqueue": ROOT / "zkqueue", "zkqueue.groth16": ROOT / "groth16",
            "zkqueue.coordinator": ROOT / "coordinator", "zkqueue.tasks": ROOT / "tasks",
            "zkqueue.workers": ROOT / "workers", "zkqueue.api": ROOT / "api"}
NAME = re.compile(r"ZKQUEUE_[A-Z0-9_]+")


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
