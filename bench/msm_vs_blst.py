"""zkqueue's BLS12-381 MSMs against blst's (supranational/blst), on the same points and scalars.

Not a test. blst is built here from its public sources with its own build.sh (which picks the
ADX assembly on CPUs that have it), into ~/.cache/zkqueue/blst/<commit>/, together with
bench/blst_shim.c, which runs blst_p1s/p2s_mult_pippenger (1 thread) or, on T threads, the
windows split that blst's Rust binding uses (blst_pXs_tile_pippenger per window, pulled by
T threads; see the shim's header). Get the sources with the `fetch` tool
(github:supranational/blst) or `git clone https://github.com/supranational/blst`, then:

    .venv/bin/python bench/msm_vs_blst.py --blst /path/to/blst [--threads 2] [--reps 7] [log2 sizes]

`--blst` is a checkout or a bare git directory (its HEAD is exported). Points are distinct
(an arithmetic progression k0*G + i*k1*G made by blst), scalars uniform below r; every
size runs both libraries alternately, `--reps` times, and prints median wall times and
zkqueue / blst (below 1.0: zkqueue is faster). Each pair of results is checked equal
byte for byte (blst's affine points and zkqueue's LEM encoding share one layout).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from zkqueue.groth16.backends.cpu import CpuBackend
from zkqueue.groth16.curves import BLS12381

HERE = Path(__file__).resolve().parent
CACHE = Path.home() / ".cache" / "zkqueue" / "blst"


def _git_dir(src: Path) -> tuple[list[str], str]:
    """git arguments that address `src` (a checkout or a bare git directory), and its HEAD."""
    args = ["git", "-C", str(src)] if (src / ".git").exists() else ["git", "--git-dir", str(src)]
    head = subprocess.run(args + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return args, head


def build_blst(src: Path) -> Path:
    """libblst.a from `src`'s HEAD plus the shim, as one shared library; cached by blst
    commit and shim contents. Returns the .so path."""
    git, head = _git_dir(src)
    shim = (HERE / "blst_shim.c").read_bytes()
    key = head[:12] + "-" + hashlib.sha256(shim).hexdigest()[:8]
    out = CACHE / key
    so = out / "libblst_shim.so"
    if so.exists():
        return so
    with tempfile.TemporaryDirectory(dir=CACHE.parent if CACHE.parent.exists() else None) as tmp:
        tree = Path(tmp) / "blst"
        tree.mkdir()
        archive = subprocess.run(git + ["archive", "HEAD"], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        print(f"# building blst {head[:12]} (build.sh) ...", file=sys.stderr, flush=True)
        subprocess.run(["sh", "./build.sh"], cwd=tree, check=True, capture_output=True)
        subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-o", str(Path(tmp) / "libblst_shim.so"),
                        str(HERE / "blst_shim.c"), "-I", str(tree / "bindings"), str(tree / "libblst.a"),
                        "-lpthread"], check=True)
        out.mkdir(parents=True, exist_ok=True)
        shutil.move(str(Path(tmp) / "libblst_shim.so"), so)
    return so


def load_shim(so: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(so))
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    for name in ("shim_mult_p1", "shim_mult_p2"):
        getattr(lib, name).argtypes = [vp, vp, vp, sz, sz, ctypes.c_int]
        getattr(lib, name).restype = ctypes.c_int
    for name in ("shim_points_p1", "shim_points_p2"):
        getattr(lib, name).argtypes = [vp, sz, vp, vp]
        getattr(lib, name).restype = ctypes.c_int
    return lib


def make_points(lib: ctypes.CDLL, g2: bool, n: int, rng: random.Random) -> np.ndarray:
    """n distinct points of the subgroup (blst's affine layout = zkqueue's LEM), shape (n, words)."""
    words = 24 if g2 else 12
    pts = np.zeros((n, words), dtype=np.uint64)
    k0, k1 = (np.frombuffer(rng.randrange(1, BLS12381.r).to_bytes(32, "little"), dtype=np.uint8).copy()
              for _ in range(2))
    fn = lib.shim_points_p2 if g2 else lib.shim_points_p1
    if fn(pts.ctypes.data, n, k0.ctypes.data, k1.ctypes.data) != 0:
        raise SystemExit("blst shim: out of memory making points")
    return pts


def make_scalars(n: int, rng: random.Random) -> np.ndarray:
    data = b"".join(rng.randrange(BLS12381.r).to_bytes(32, "little") for _ in range(n))
    return np.frombuffer(data, dtype=np.uint64).reshape(n, 4).copy()


def compare(lib: ctypes.CDLL, logs: list[int], threads: int, reps: int, rng: random.Random) -> None:
    be = CpuBackend(BLS12381, threads=threads)
    print(f"# BLS12-381 MSM, {threads} thread(s), median wall of {reps} alternating runs; "
          f"blst = blst_pXs_mult_pippenger (1 thread) / tile_pippenger per window (T threads)")
    print(f"{'msm':<8}{'log2 n':>7}{'zkqueue ms':>12}{'blst ms':>10}{'zkq/blst':>10}")
    for g2 in (False, True):
        for log_n in logs:
            n = 1 << log_n
            pts = make_points(lib, g2, n, rng)
            scalars = make_scalars(n, rng)
            out = np.zeros(pts.shape[1], dtype=np.uint64)
            mult = lib.shim_mult_p2 if g2 else lib.shim_mult_p1
            zkq_fn = be.msm_g2 if g2 else be.msm_g1

            def blst_run() -> bytes:
                if mult(out.ctypes.data, pts.ctypes.data, scalars.ctypes.data, n, 255, threads) != 0:
                    raise SystemExit("blst shim failed")
                return out.tobytes()

            def zkq_run() -> bytes:
                return zkq_fn(pts, scalars)

            if blst_run() != zkq_run():
                raise SystemExit(f"{'G2' if g2 else 'G1'} 2^{log_n}: zkqueue and blst disagree")
            times: dict[str, list[float]] = {"zkq": [], "blst": []}
            for i in range(reps):
                order = [("zkq", zkq_run), ("blst", blst_run)]
                for name, fn in (order if i % 2 == 0 else order[::-1]):
                    t = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t)
            z, b = statistics.median(times["zkq"]), statistics.median(times["blst"])
            print(f"{'G2' if g2 else 'G1':<8}{log_n:>7}{z * 1e3:>12.1f}{b * 1e3:>10.1f}{z / b:>10.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", type=int, nargs="*", default=[12, 14, 16, 18], help="log2 sizes")
    ap.add_argument("--blst", required=True, type=Path, help="blst sources: a checkout or a bare git directory")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    lib = load_shim(build_blst(args.blst))
    compare(lib, args.logs, args.threads, args.reps, random.Random(1))


if __name__ == "__main__":
    main()
