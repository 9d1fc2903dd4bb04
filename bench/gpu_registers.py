"""Registers, stack and spills of every CUDA kernel, per curve, unit and architecture, from
`nvcc -cubin -Xptxas -v` on the exact translation units NVRTC compiles (no GPU needed).

    python3 bench/gpu_registers.py             # compile and print the table
    python3 bench/gpu_registers.py --write     # ... and rewrite bench/gpu_registers.tsv

bench/gpu_registers.tsv is the checked table: tests/test_cuda_compile.py compiles the units
again and fails when a count differs from it (skipped where nvcc is absent), so a change that
moves registers or adds a spill is seen and the table updated in the same commit. The block
size of each launch is chosen at run time from the kernel's registers (cuda.occupancy_block);
the last column says what that gives on a 65536-register, 2048-thread multiprocessor.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zkqueue.groth16 import curves  # noqa: E402
from zkqueue.groth16.backends import cuda, cuda_source  # noqa: E402

TABLE = ROOT / "bench" / "gpu_registers.tsv"
ARCHS = ("sm_80", "sm_90")
CURVES = (curves.BN128, curves.BLS12381)
COLUMNS = ("curve", "unit", "arch", "kernel", "registers", "stack_bytes", "spill_bytes", "smem_bytes", "block",
           "warps_per_sm")
NVCC = os.environ.get("NVCC") or shutil.which("nvcc") or next(
    (p for p in ("/usr/local/cuda/bin/nvcc",) if Path(p).exists()), None)


def compile_unit(curve, unit: str, arch: str, workdir: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """nvcc -cubin -Xptxas -v of one unit's translation unit, with NVRTC's options."""
    src = workdir / f"zkq_{curve.name}_{unit}.cu"
    if not src.exists():
        src.write_text(cuda_source.module_source(curve, unit))
    out = workdir / f"zkq_{curve.name}_{unit}_{arch}.cubin"
    cmd = [NVCC, *cuda_source.compile_options(), f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", str(out), str(src)]
    return subprocess.run(cmd, capture_output=True, text=True), out


def parse(ptxas: str) -> dict[str, dict[str, int]]:
    """{kernel: registers, stack_bytes, spill_bytes, smem_bytes} from -Xptxas -v output."""
    rows: dict[str, dict[str, int]] = {}
    current = None
    for line in ptxas.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            current = rows.setdefault(m.group(1), {"registers": 0, "stack_bytes": 0, "spill_bytes": 0,
                                                   "smem_bytes": 0})
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:   # the entry's own line comes first; callees' may follow: count every spill
            current["spill_bytes"] += int(m.group(2)) + int(m.group(3))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
            s = re.search(r"(\d+) bytes cumulative stack size", line)
            if s:
                current["stack_bytes"] = int(s.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            current["smem_bytes"] = int(s.group(1)) if s else 0
            current = None
    return rows


def table_rows(results: dict) -> list[dict]:
    """Rows of the table from {(curve, unit, arch): parse(...)}."""
    rows = []
    for (curve, unit, arch), kernels in sorted(results.items()):
        for kernel, v in sorted(kernels.items()):
            block = cuda.occupancy_block(v["registers"], 1024)
            regs_per_warp = -(-max(v["registers"], 1) * 32 // 256) * 256
            warps = min(65536 // (regs_per_warp * (block // 32)), 2048 // block, 32) * (block // 32)
            rows.append({"curve": curve, "unit": unit, "arch": arch, "kernel": kernel, **v, "block": block,
                         "warps_per_sm": warps})
    return rows


def read_table(path: Path = TABLE) -> list[dict]:
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    header = lines[0].split("\t")
    return [{k: (int(v) if v.isdigit() else v) for k, v in zip(header, ln.split("\t"))} for ln in lines[1:]]


def write_table(rows: list[dict], path: Path = TABLE) -> None:
    text = ["# nvcc -cubin -Xptxas -v of each unit's translation unit (bench/gpu_registers.py --write);",
            f"# {subprocess.run([NVCC, '--version'], capture_output=True, text=True).stdout.strip().splitlines()[-1]}",
            "\t".join(COLUMNS)]
    text += ["\t".join(str(r[c]) for c in COLUMNS) for r in rows]
    path.write_text("\n".join(text) + "\n")


def compile_all(workdir: Path, jobs: int | None = None, archs: tuple[str, ...] = ARCHS) -> dict:
    """{(curve, unit, arch): CompletedProcess} for every curve, unit (selftest too) and arch."""
    work = [(c, u, a) for c in CURVES for u in cuda_source.UNITS for a in archs]
    with ThreadPoolExecutor(jobs or os.cpu_count() or 1) as pool:
        done = list(pool.map(lambda w: compile_unit(*w, workdir), work))
    return {(c.name, u, a): d for (c, u, a), d in zip(work, done)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args()
    if not NVCC:
        print("nvcc is not installed", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        compiled = compile_all(Path(tmp), args.jobs)
    bad = [k for k, (proc, _) in compiled.items() if proc.returncode]
    for k in bad:
        print(k, compiled[k][0].stderr[-3000:], file=sys.stderr)
    if bad:
        return 1
    rows = table_rows({k: parse(proc.stderr + proc.stdout) for k, (proc, _) in compiled.items()})
    for r in rows:
        print("\t".join(str(r[c]) for c in COLUMNS))
    if args.write:
        write_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
