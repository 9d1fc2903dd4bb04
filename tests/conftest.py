"""Shared test helpers: the committed fixtures, and real snarkjs / circom2 / zkqueue processes.

snarkjs and circom2 come from npm into .interop/ (scripts/setup.sh). When
ZKQUEUE_REQUIRE_INTEROP=1 (as ./run-tests sets), their absence fails the tests instead of
skipping them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CIRCUITS = Path(__file__).resolve().parent / "circuits"
NODE_MODULES = Path(os.environ.get("ZKQUEUE_INTEROP_DIR", ROOT / ".interop")) / "node_modules"
SNARKJS_CLI = NODE_MODULES / "snarkjs" / "build" / "cli.cjs"
CIRCOM2_CLI = NODE_MODULES / "circom2" / "cli.js"

# The real circom2 + snarkjs 0.7.6 fixtures (copied from the project's shared material).
FIXTURE_NAMES = sorted(p.name for p in FIXTURES.iterdir() if (p / "circuit_final.zkey").exists())


def fixture_dir(name: str) -> Path:
    return FIXTURES / name


def _require(tool: Path, what: str) -> None:
    if tool.exists() and shutil.which("node"):
        return
    msg = f"{what} not installed at {tool} (run scripts/setup.sh)"
    if os.environ.get("ZKQUEUE_REQUIRE_INTEROP") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


def run(cmd: list[str], *, cwd: Path | None = None, check: bool = True, timeout: float = 600
        ) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {proc.returncode}\n"
                             f"stdout: {proc.stdout[-3000:]}\nstderr: {proc.stderr[-3000:]}")
    return proc


def snarkjs(*args, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs the npm snarkjs CLI (the independent implementation our files must agree with)."""
    _require(SNARKJS_CLI, "snarkjs")
    return run(["node", "--max-old-space-size=8192", SNARKJS_CLI, *args], check=check, cwd=cwd)


def snarkjs_verifies(vk: Path, public: Path, proof: Path) -> bool:
    """True when `snarkjs groth16 verify` accepts the proof (it prints OK and exits 0)."""
    proc = snarkjs("groth16", "verify", vk, public, proof, check=False)
    return proc.returncode == 0 and "OK" in proc.stdout


def circom2(*args, cwd: Path) -> subprocess.CompletedProcess:
    _require(CIRCOM2_CLI, "circom2")
    return run(["node", CIRCOM2_CLI, *args], cwd=cwd)


def zkqueue(*args, check: bool = False, timeout: float = 600) -> subprocess.CompletedProcess:
    """Runs the `zkqueue` command line in a child process, as a user would."""
    return run([sys.executable, "-m", "zkqueue.groth16.cli", *args], check=check, timeout=timeout)


@pytest.fixture(autouse=True)
def process_settings_from_env():
    """zkqueue.config reads this process's settings once and caches them; a test that sets
    ZKQUEUE_* variables (monkeypatch) has them read afresh, and the next test starts again
    from the real environment."""
    from zkqueue import config
    config.set_process(None)
    yield
    config.set_process(None)


def select_arith(monkeypatch, variant: str) -> str:
    """Makes `variant` ("x86-adx" or "portable") the native arithmetic of this test's calls
    (ZKQUEUE_CPU_ARITH, read afresh)."""
    from zkqueue import config
    monkeypatch.setenv("ZKQUEUE_CPU_ARITH", variant)
    config.set_process(None)
    return variant


@pytest.fixture(scope="session")
def built_circuits(tmp_path_factory) -> dict[str, Path]:
    """tests/circuits/interop.circom built on each curve with circom2 + snarkjs, now.

    4,017 constraints and 8 public signals; setup with the committed p12 powers of tau,
    then one beacon contribution. Each folder holds circuit_0000.zkey (as `groth16 setup`
    writes it: sections out of order), circuit_final.zkey (reordered by the contribution),
    verification_key.json (verification_key_0000.json for the first key)
    and witness.wtns.
    """
    base = tmp_path_factory.mktemp("circuits")
    out = {}
    for curve in ("bn128", "bls12381"):
        d = base / curve
        d.mkdir()
        shutil.copy(CIRCUITS / "interop.circom", d)
        circom2("interop.circom", "--r1cs", "--wasm", "--O1", "--prime", curve, "-o", ".", cwd=d)
        ptau = FIXTURES / "ptau" / f"{curve}_p12.ptau"
        snarkjs("groth16", "setup", "interop.r1cs", ptau, "circuit_0000.zkey", cwd=d)
        snarkjs("zkey", "beacon", "circuit_0000.zkey", "circuit_final.zkey",
                "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0", "10", cwd=d)
        snarkjs("zkey", "export", "verificationkey", "circuit_final.zkey", "verification_key.json", cwd=d)
        snarkjs("zkey", "export", "verificationkey", "circuit_0000.zkey", "verification_key_0000.json", cwd=d)
        (d / "input.json").write_text(json.dumps({"pub": ["3", "5", "7", "11", "13", "17"],
                                                  "x": str(0x9E3779B97F4A7C15)}))
        snarkjs("wtns", "calculate", "interop_js/interop.wasm", "input.json", "witness.wtns", cwd=d)
        out[curve] = d
    return out


# ./run-tests --quick (pytest -m quick): the unit, format, interop and Lua tests and a handful
# of end-to-end queue tests, for a developer's inner loop (minutes on 2 cores). The full suite
# (./run-tests, CI) runs everything.
QUICK_MODULES = {
    "test_bad_input.py", "test_config.py", "test_csprng.py", "test_formats.py", "test_interop.py",
    "test_lua_scripts.py", "test_packaging.py", "test_readme.py", "test_compose.py", "test_fingerprint.py",
    "test_queue_barrier.py", "test_architecture.py", "test_admission.py",
}
QUICK_TESTS = {
    "test_queue_e2e.py::test_four_partitions_on_two_cpu_workers_snarkjs_accepts_every_proof",
    "test_queue_blame.py::test_a_bad_witness_on_a_one_build_fleet_fails_alone_and_the_others_are_delivered",
    "test_queue_kill.py::test_sigkill_of_the_pool_child_mid_partition",
    "test_queue_synthesis.py::test_one_cpu_worker_proves_the_first_partition_before_the_last_witness_exists",
    "test_queue_poison.py::test_the_reaper_and_the_metrics_read_any_value_on_a_list",
    "test_queue_wait_cost.py::test_waiting_costs_the_same_per_partition_from_64_to_1024_partitions",
    "test_affinity.py::test_the_holder_chosen_is_the_one_free_soonest_and_only_if_sooner_than_a_load_here",
}


def pytest_collection_modifyitems(config, items):
    found = set()
    for item in items:
        name = item.nodeid.rsplit("/", 1)[-1].split("[")[0]
        if item.path.name in QUICK_MODULES or name in QUICK_TESTS:
            item.add_marker(pytest.mark.quick)
            found.add(name)
    if config.getoption("markexpr") == "quick" and not config.args[1:] and QUICK_TESTS - found:
        raise pytest.UsageError(f"QUICK_TESTS names tests that do not exist: {sorted(QUICK_TESTS - found)}")
