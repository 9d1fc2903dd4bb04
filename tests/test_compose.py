"""compose.yaml: every command it runs is a real `zkqueue` command line, every variable it sets
on a zkqueue container is one the code reads, and the services the deployment needs are there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from queue_support import queue  # noqa: F401  (fixture)

from test_config import variables_named

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
# Our image's services (the redis service runs the upstream image).
OURS = {name: s for name, s in SERVICES.items() if "build" in s}


def parser():
    from zkqueue.groth16.cli import add_commands, new_parser

    from zkqueue.cli import add_queue_commands
    p, sub = new_parser()
    add_commands(sub)
    add_queue_commands(sub)
    return p


def test_our_services_build_from_the_dockerfile():
    assert (ROOT / "Dockerfile").is_file()
    assert {"worker-gpu", "worker-cpu", "flower", "demo"} <= set(OURS)
    for name, s in OURS.items():
        build = s["build"] if isinstance(s["build"], dict) else {"context": s["build"]}
        assert (ROOT / build["context"] / build.get("dockerfile", "Dockerfile")).is_file(), name


@pytest.mark.parametrize("name", sorted(OURS))
def test_every_command_is_a_zkqueue_command_line(name):
    command = OURS[name]["command"]
    assert isinstance(command, list), f"{name}: write the command as a list"
    args = parser().parse_args([str(c) for c in command])   # SystemExit on an unknown command/option
    assert callable(args.func)


@pytest.mark.parametrize("name", sorted(OURS))
def test_every_variable_set_is_read_by_zkqueue(name):
    env = OURS[name].get("environment") or {}
    assert isinstance(env, dict), f"{name}: write environment as a mapping"
    unknown = set(env) - variables_named()
    assert not unknown, f"{name} sets {sorted(unknown)}, which nothing in zkqueue reads"


ROLE_OF = {"worker-gpu": "worker", "worker-cpu": "worker", "flower": "admin", "metrics": "client", "demo": "client",
           "api": "client"}


def test_redis_is_persistent_tls_only_with_one_user_per_role():
    cmd = " ".join(SERVICES["redis"]["command"])
    assert "--appendonly yes" in cmd
    assert "--port 0 --tls-port 6379" in cmd and "--tls-cert-file /etc/zkqueue/tls/redis.crt" in cmd
    assert "render-users.sh /etc/zkqueue/redis/users.acl /data/users.acl" in cmd and "--aclfile /data/users.acl" in cmd
    assert "./deploy/redis:/etc/zkqueue/redis:ro" in SERVICES["redis"]["volumes"]
    assert (ROOT / "deploy" / "redis" / "users.acl").is_file() and (ROOT / "deploy" / "redis" / "render-users.sh").is_file()
    assert "requirepass" not in cmd                      # no shared password: users
    for name, s in OURS.items():
        role = ROLE_OF[name]
        url = s["environment"]["ZKQUEUE_REDIS_URL"]
        assert url.startswith(f"rediss://{role}:${{REDIS_{role.upper()}_PASSWORD:?"), (name, url)
        assert s["environment"]["ZKQUEUE_REDIS_CA_FILE"] == "/etc/zkqueue/tls/ca.crt", name
    health = " ".join(SERVICES["redis"]["healthcheck"]["test"])
    assert "--tls" in health and "--user admin" in health


def test_gpu_workers_reserve_devices_and_cpu_workers_have_their_profile():
    gpu = SERVICES["worker-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)
    assert gpu["command"][0] == "worker" and "--cpu" not in gpu["command"]   # one process per GPU found
    cpu = SERVICES["worker-cpu"]
    assert "cpu" in cpu["profiles"] and cpu["command"][:2] == ["worker", "--cpu"]


def test_flower_has_auth_and_the_demo_is_one_shot():
    assert "ZKQUEUE_FLOWER_AUTH" in SERVICES["flower"]["environment"]
    demo = SERVICES["demo"]
    assert demo["command"][0] == "demo" and "--external" in demo["command"]
    assert demo["restart"] == "no"


def test_the_demo_services_command_proves_on_running_workers(queue):  # noqa: F811
    group = queue.start_workers(2)
    queue.ready(group)
    proc = subprocess.run([sys.executable, "-m", "zkqueue.cli", *SERVICES["demo"]["command"][:2],
                           "--timeout", "120"], cwd=ROOT, env=queue.env(), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "demo: OK" in proc.stdout and proc.stdout.count("verified (worker") == 4, proc.stdout


def test_the_api_serves_its_own_port_from_the_settings_and_is_opt_in():
    api = SERVICES["api"]
    assert api["command"] == ["serve"] and "api" in api["profiles"]
    env = api["environment"]
    assert api["ports"] == [f"127.0.0.1:${{API_HOST_PORT:-8080}}:{env['ZKQUEUE_API_PORT']}"]
    assert env["ZKQUEUE_API_HOST"] == "0.0.0.0"     # inside its container; published on localhost only
    assert "/healthz" in " ".join(api["healthcheck"]["test"])


def test_published_ports_listen_on_localhost_only():
    for name, s in SERVICES.items():
        for port in s.get("ports", []):
            assert isinstance(port, str) and port.startswith("127.0.0.1:"), f"{name} publishes {port!r}"


def test_base_images_default_to_the_upstream_images():
    """CI swaps both for a local Debian image; users get the upstream ones unless they set them."""
    for name, s in OURS.items():
        assert s["build"]["args"]["BASE_IMAGE"] == "${BASE_IMAGE:-python:3.11-slim-bookworm}", name
    assert SERVICES["redis"]["image"] == "${REDIS_IMAGE:-redis:7-bookworm}"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim-bookworm\nFROM ${BASE_IMAGE}" in dockerfile


def package_folders() -> set[str]:
    """Top-level folders the distribution's packages come from, per pyproject.toml."""
    import tomllib
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = setuptools["package-dir"]
    # A package not mapped lives in the folder its first name part names (`zkqueue` -> zkqueue/).
    return {mapped[p] if p in mapped else p.split(".")[0] for p in setuptools["packages"] if "." not in p or p in mapped}


def test_the_docker_build_context_holds_every_package():
    """.dockerignore is an allowlist: a package folder missing from it would build an image
    without that package. Renaming or moving packages must update this list."""
    allowed = {line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.startswith("!")}
    folders = package_folders()
    assert folders and all((ROOT / f).is_dir() for f in folders), folders
    assert folders <= allowed, f".dockerignore does not let {sorted(folders - allowed)} into the build context"
    assert {"pyproject.toml", "README.md"} <= allowed
