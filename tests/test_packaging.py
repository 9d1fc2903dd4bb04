"""Packaging: `pip install .` leaves exactly one top-level import package, `zkqueue`.

The source folders (groth16/, coordinator/, tasks/, workers/, api/) keep their place at the top of
the repository and are installed beneath `zkqueue` (pyproject.toml maps them). That nothing
imports them by their folder names, and that pyproject.toml lists every one, are rules of
tests/test_architecture.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"groth16": "zkqueue.groth16", "coordinator": "zkqueue.coordinator", "tasks": "zkqueue.tasks",
           "workers": "zkqueue.workers", "api": "zkqueue.api", "zkqueue": "zkqueue"}


def test_pip_install_into_a_fresh_venv_leaves_one_top_level_package(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    before = {p.name for p in site.iterdir()}
    # From a copy of what the distribution is made of (as the Docker build context is): building
    # in the checkout would leave a build/ folder whose stale files a later build would ship.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (src / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "zkqueue", src / "scripts" / "zkqueue")   # the command
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", str(src)], check=True, timeout=600)
    added = {p.name for p in site.iterdir()} - before - {"__pycache__"}
    assert {n for n in added if not n.endswith(".dist-info")} == {"zkqueue"}, added
    files = subprocess.run([py, "-c", "import importlib.metadata as m; "
                            "print(sorted({f.parts[0] for f in m.files('zkqueue') if f.parts[0] != '..'}))"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert files.strip() == "['zkqueue', 'zkqueue-0.1.0.dist-info']", files  # (and bin/zkqueue)

    # Every module imports from the install (dependencies from the test venv, appended after the
    # fresh venv's own site-packages; run outside the checkout so that nothing comes from it),
    # and the data the code reads beside itself is installed: Lua scripts, kernels, demo circuit.
    deps = sysconfig.get_paths()["purelib"]
    check = """
import importlib, pkgutil, sys, zkqueue
from pathlib import Path
site = Path(sys.argv[1])
for m in pkgutil.walk_packages(zkqueue.__path__, "zkqueue."):
    mod = importlib.import_module(m.name)
    assert Path(mod.__file__).is_relative_to(site), (m.name, mod.__file__)
from zkqueue.coordinator import transitions
from zkqueue.groth16 import native
from zkqueue import demo
assert (Path(transitions.__file__).parent / "lua" / "claim.lua").is_file()
assert [p.name for p in native.kernel_sources()] and all(p.is_relative_to(site) for p in native.kernel_sources())
assert sorted(p.name for p in demo.DATA.iterdir())[:2] == ["circuit_final.zkey", "verification_key.json"]
print("ok", len(list(pkgutil.walk_packages(zkqueue.__path__, "zkqueue."))))
"""
    proc = subprocess.run([py, "-c", check, str(site)], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": deps, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stdout + proc.stderr

    # The installed command proves, and its start-up loads none of the modules a one-shot
    # prove can do without: re and enum (pip's generated entry-point wrapper imports re, so
    # the command is a plain script), pathlib (re, enum, urllib.parse) and functools
    # (collections), about 15 ms of a 2^12 prove's 100. The native build is the test venv's
    # (same kernel sources, so the same cached build).
    from zkqueue import config
    fx = ROOT / "tests" / "fixtures" / "bn128_chain_12"
    proc = subprocess.run([venv / "bin" / "zkqueue", "prove", "--backend", "cpu", fx / "circuit_final.zkey",
                           fx / "witness.wtns", tmp_path / "proof.json", tmp_path / "public.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": deps, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "ZKQUEUE_CACHE_DIR": config.process().cache_dir, "PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "zkqueue.groth16.native_prove" in imported
    assert not {"re", "enum", "pathlib", "functools", "collections"} & imported, sorted(imported)


def test_the_set_up_command_runs_this_checkout_and_loads_what_a_wheel_does(tmp_path):
    """scripts/setup.sh's `zkqueue` (beside the Python running these tests) runs this
    checkout's files, found through one plain .pth line (no setuptools editable finder, which
    would load pathlib, re and enum at every start), and proves."""
    command = Path(sys.executable).parent / "zkqueue"
    assert command.is_file(), f"no {command}: run scripts/setup.sh, which installs it"
    # Outside the checkout: nothing comes from the working directory.
    where = subprocess.run([sys.executable, "-c", "import sys, zkqueue.groth16, zkqueue.cli; "
                            "print(zkqueue.groth16.__file__, zkqueue.cli.__file__, "
                            "[type(f).__name__ for f in sys.meta_path])"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    groth16_init, cli, finders = where.stdout.split(" ", 2)
    assert (groth16_init, cli) == (str(ROOT / "groth16" / "__init__.py"), str(ROOT / "zkqueue" / "cli.py"))
    assert "CheckoutFinder" in finders and "_EditableFinder" not in finders, finders
    from zkqueue import config
    fx = ROOT / "tests" / "fixtures" / "bn128_chain_12"
    proc = subprocess.run([command, "prove", "--backend", "cpu", fx / "circuit_final.zkey", fx / "witness.wtns",
                           tmp_path / "proof.json", tmp_path / "public.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "ZKQUEUE_CACHE_DIR": config.process().cache_dir, "PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert {"zkqueue._checkout", "zkqueue.groth16.native_prove"} <= imported
    assert not {"re", "enum", "pathlib", "functools", "collections"} & imported, sorted(imported)
