"""Integer instructions per field product, square and G1 mixed addition, from the sm_90 machine
code (SASS) of one-line kernels: zkqueue's kernels against sppark's field type (`fp_t`,
ff/mont_t.cuh) for the same modulus, compiled by the same nvcc. No GPU needed.

    python3 bench/gpu_sass.py --sppark /path/to/sppark     # a checkout or a bare git dir
    python3 bench/gpu_sass.py                               # git clone sppark into a temp dir
    python3 bench/gpu_sass.py --ours-only                   # zkqueue's counts alone
    python3 bench/gpu_sass.py --sppark DIR --max-ratio 1.15 # exit 1 when a ratio is above

Each operation is a kernel whose thread loads its operands, does the one operation and stores
the result (the loads, stores and three address instructions are the same on both sides). The
SASS comes from `cuobjdump -sass` (PyPI: nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm; the
tools are looked for on PATH, then in this Python's nvidia/cu*/bin). What is counted:

* integer instructions: every instruction except memory (LD*, ST*, LDC, ULDC, ...), control
  flow (BRA, EXIT, CALL, RET, BSSY, BSYNC, ...), NOP and special-register reads; that is the
  multiply-adds, adds, selects, logic, compares and moves that the integer pipes issue.
* on the longest path through the kernel's control-flow graph, callees not entered: for the
  product and the square (straight-line code) the whole kernel; for the mixed addition the
  generic case (U2 != X1), which is longer than the infinity and doubling cases on both sides
  (zkqueue's doubling is a call; sppark's is inlined and shorter: 6M+3S against 8M+2S).

sppark is a peer here, not a dependency (as rapidsnark is for the CPU benches): its headers are
read from the given directory at bench time and nothing of it is copied into zkqueue. Compared:
`alt_bn128::fp_t` / `bls12_381::fp_t` operator* and operator^(2) (the wide_t square), and
`xyzz_t<fp_t>::add(const Affine_t<fp_t>&)` (madd-2008-s, the straight-line one sppark's
pippenger accumulates with) against zkqueue's `Fq::operator*`, `Fq::sqr()` and
`Xyzz<Fq>::add_affine`; and `fr_t` operator* against `Fr::operator*` (the NTT's product).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zkqueue.groth16 import curves  # noqa: E402
from zkqueue.groth16.backends import cuda_source  # noqa: E402

ARCH = "sm_90"
SPPARK_URL = "https://github.com/supranational/sppark"
OPS = ("mul", "sqr", "madd", "frmul")
OP_NAMES = {"mul": "Fq product", "sqr": "Fq square", "madd": "G1 mixed addition (XYZZ + affine)",
            "frmul": "Fr product (the NTT's)"}
CURVES = (curves.BN128, curves.BLS12381)
# sppark's header and namespace of each curve's base field.
SPPARK_FIELD = {"bn128": ("ff/alt_bn128.hpp", "alt_bn128"), "bls12381": ("ff/bls12-381.hpp", "bls12_381")}

# ---- the one-line kernels -------------------------------------------------------------------

OURS_SOURCE = """\
#define ZKQ_CURVE {curve_id}
#include "device.cuh"
using namespace zkq;
using namespace zkq::gpu;
extern "C" __global__ void k_mul(const Fq* a, const Fq* b, Fq* r) {{ int i = threadIdx.x; r[i] = a[i] * b[i]; }}
extern "C" __global__ void k_sqr(const Fq* a, Fq* r) {{ int i = threadIdx.x; r[i] = a[i].sqr(); }}
extern "C" __global__ void k_madd(const Xyzz<Fq>* a, const Affine<Fq>* b, Xyzz<Fq>* r) {{
    int i = threadIdx.x;
    r[i] = a[i].add_affine(b[i]);
}}
extern "C" __global__ void k_frmul(const Fr* a, const Fr* b, Fr* r) {{ int i = threadIdx.x; r[i] = a[i] * b[i]; }}
"""

SPPARK_SOURCE = """\
#include <cstdint>
#include "{header}"
#include "ec/affine_t.hpp"
#include "ec/xyzz_t.hpp"
using fp_t = {ns}::fp_t;
using affine = Affine_t<fp_t>;
using xyzz = xyzz_t<fp_t>;
extern "C" __global__ void k_mul(const fp_t* a, const fp_t* b, fp_t* r) {{ int i = threadIdx.x; r[i] = a[i] * b[i]; }}
extern "C" __global__ void k_sqr(const fp_t* a, fp_t* r) {{ int i = threadIdx.x; fp_t x = a[i]; r[i] = x ^ 2; }}
extern "C" __global__ void k_madd(const xyzz::mem_t* a, const affine::mem_t* b, xyzz::mem_t* r) {{
    int i = threadIdx.x;
    xyzz p = a[i];
    affine q = b[i];
    p.add(q);
    r[i] = p;
}}
using fr_t = {ns}::fr_t;
extern "C" __global__ void k_frmul(const fr_t* a, const fr_t* b, fr_t* r) {{ int i = threadIdx.x; r[i] = a[i] * b[i]; }}
"""

# ---- SASS: parsing and counting --------------------------------------------------------------

# Opcodes (the part before the first '.') that are not integer work.
NOT_INTEGER = {
    # memory
    "LD", "LDG", "LDS", "LDL", "LDC", "ULDC", "LDSM", "ST", "STG", "STS", "STL", "ATOM", "ATOMG", "ATOMS",
    "RED", "CCTL", "LDGSTS", "LDGDEPBAR", "DEPBAR", "MEMBAR", "ERRBAR", "FENCE", "UBLKCP", "UTMALDG",
    # control flow and scheduling
    "BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BSSY", "BSYNC", "WARPSYNC", "BAR", "YIELD", "NOP",
    "BREAK", "BPT", "KILL", "ACQBULK", "ELECT", "ENDCOLLECTIVE", "PREEXIT", "BMOV",
    # special registers
    "S2R", "S2UR", "CS2R",
}

INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[0-7T]\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
FUNCTION = re.compile(r"Function\s*:\s*(\S+)")


@dataclass
class Insn:
    addr: int
    pred: bool  # predicated (@P0 / @!P0): a predicated branch or exit may fall through
    opcode: str  # with modifiers, e.g. IMAD.WIDE.U32.X
    operands: str

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def integer(self) -> bool:
        return self.base not in NOT_INTEGER

    def target(self) -> int:
        m = re.search(r"0x([0-9a-f]+)", self.operands)
        if not m:
            raise ValueError(f"no branch target in {self.opcode} {self.operands}")
        return int(m.group(1), 16)


def parse_sass(text: str) -> dict[str, list[Insn]]:
    """{function name: its instructions in address order} from `cuobjdump -sass` output."""
    functions: dict[str, list[Insn]] = {}
    current = None
    for line in text.splitlines():
        m = FUNCTION.search(line)
        if m:
            current = functions.setdefault(m.group(1), [])
            continue
        m = INSN.search(line)
        if m and current is not None:
            current.append(Insn(int(m.group(1), 16), bool(m.group(2)), m.group(3), m.group(4).strip()))
    return functions


@dataclass
class PathCount:
    integer: int = 0  # integer instructions on the path
    total: int = 0  # every instruction on the path
    opcodes: Counter = field(default_factory=Counter)  # integer opcodes on the path

    def plus(self, insn: Insn) -> "PathCount":
        c = Counter(self.opcodes)
        if insn.integer:
            c[insn.opcode] += 1
        return PathCount(self.integer + insn.integer, self.total + 1, c)


def longest_path(insns: list[Insn]) -> PathCount:
    """Integer instructions on the longest path from the kernel's entry to an EXIT, through its
    control-flow graph; CALLs count as one instruction (callees are not entered). Raises on a
    reachable loop (the one-line kernels have none) or an indirect branch."""
    index = {insn.addr: i for i, insn in enumerate(insns)}

    def successors(i: int) -> list[int]:
        insn = insns[i]
        nxt = [i + 1] if i + 1 < len(insns) else []
        if insn.base in ("BRX", "JMX", "JMP"):
            raise ValueError(f"indirect branch at {insn.addr:#x}: cannot follow")
        if insn.base == "BRA":
            tgt = index[insn.target()]
            return [tgt] + (nxt if insn.pred else [])
        if insn.base in ("EXIT", "RET"):
            return nxt if insn.pred else []
        return nxt

    # Iterative DFS in post order (the kernels run to tens of thousands of instructions).
    best: dict[int, PathCount] = {}
    state: dict[int, int] = {}  # 1 on the stack, 2 done
    stack = [(0, 0)]
    while stack:
        i, k = stack.pop()
        succ = successors(i)
        if k == 0:
            state[i] = 1
        if k < len(succ):
            stack.append((i, k + 1))
            j = succ[k]
            if state.get(j) == 1:
                raise ValueError(f"loop at {insns[j].addr:#x}: no longest path")
            if j not in state:
                stack.append((j, 0))
            continue
        tail = max((best[j] for j in succ), key=lambda c: (c.integer, c.total), default=PathCount())
        best[i] = tail.plus(insns[i])
        state[i] = 2
    return best[0]


# ---- tools ----------------------------------------------------------------------------------

def find_nvcc() -> str | None:
    return os.environ.get("NVCC") or shutil.which("nvcc") or next(
        (p for p in ("/usr/local/cuda/bin/nvcc",) if Path(p).exists()), None)


def find_cuobjdump() -> str | None:
    """cuobjdump on PATH, or the one PyPI's nvidia-cuda-cuobjdump put in this Python's tree
    (nvdisasm, which it runs, is looked for beside it)."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    site = Path(sysconfig.get_paths()["purelib"]) / "nvidia"
    for cand in sorted(site.glob("cu*/bin/cuobjdump"), reverse=True):
        return str(cand)
    return None


def sass(cubin: Path, cuobjdump: str) -> str:
    env = dict(os.environ)
    env["PATH"] = f"{Path(cuobjdump).parent}{os.pathsep}{env.get('PATH', '')}"  # nvdisasm beside it
    proc = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(f"cuobjdump -sass failed: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def compile_cubin(nvcc: str, src: Path, includes: list[Path], extra: tuple[str, ...] = ()) -> Path:
    out = src.with_suffix(".cubin")
    cmd = [nvcc, "-std=c++17", *extra, *[f"-I{p}" for p in includes], f"-arch={ARCH}", "-cubin", "-o", str(out),
           str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    return out


def sppark_tree(arg: str | None, workdir: Path) -> Path:
    """A directory holding sppark's ff/ and ec/: the given checkout, the files of a given bare
    git directory (git archive HEAD), or a shallow clone."""
    if arg:
        path = Path(arg)
        if (path / "ff" / "mont_t.cuh").exists():
            return path
        if (path / "HEAD").exists() and (path / "objects").exists():  # a bare git directory
            dest = workdir / "sppark"
            dest.mkdir()
            archive = subprocess.run(["git", f"--git-dir={path}", "archive", "HEAD", "ff", "ec"], capture_output=True,
                                     check=True)
            subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
            return dest
        raise SystemExit(f"--sppark {arg}: neither a checkout (ff/mont_t.cuh) nor a bare git directory")
    dest = workdir / "sppark"
    subprocess.run(["git", "clone", "-q", "--depth", "1", SPPARK_URL, str(dest)], check=True)
    return dest


def sppark_commit(tree_arg: str | None, tree: Path) -> str:
    for git_args in ([f"--git-dir={tree_arg}"] if tree_arg else [], ["-C", str(tree)]):
        proc = subprocess.run(["git", *git_args, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
        if proc.returncode == 0:
            return proc.stdout.strip()
    return "unknown"


# ---- the bench ------------------------------------------------------------------------------

def count_kernels(cubin: Path, cuobjdump: str) -> dict[str, PathCount]:
    functions = parse_sass(sass(cubin, cuobjdump))
    return {op: longest_path(functions[f"k_{op}"]) for op in OPS}


def ours(curve, workdir: Path, nvcc: str, cuobjdump: str) -> dict[str, PathCount]:
    src = workdir / f"ours_{curve.name}.cu"
    src.write_text(OURS_SOURCE.format(curve_id=curve.native_id))
    return count_kernels(compile_cubin(nvcc, src, [cuda_source.KERNEL_DIR]), cuobjdump)


def sppark(curve, tree: Path, workdir: Path, nvcc: str, cuobjdump: str) -> dict[str, PathCount]:
    header, ns = SPPARK_FIELD[curve.name]
    src = workdir / f"sppark_{curve.name}.cu"
    src.write_text(SPPARK_SOURCE.format(header=header, ns=ns))
    return count_kernels(compile_cubin(nvcc, src, [tree]), cuobjdump)


def wide_madds(c: PathCount) -> int:
    return sum(n for op, n in c.opcodes.items() if op.startswith("IMAD.WIDE.U32"))


def table(results: dict, with_sppark: bool) -> list[str]:
    head = "| curve | operation | zkqueue | of which IMAD.WIDE.U32(.X) |"
    rule = "|---|---|---:|---:|"
    if with_sppark:
        head += " sppark | of which IMAD.WIDE.U32(.X) | ratio |"
        rule += "---:|---:|---:|"
    lines = [head, rule]
    for curve in CURVES:
        for op in OPS:
            o = results[(curve.name, "ours")][op]
            row = f"| {curve.name} | {OP_NAMES[op]} | {o.integer} | {wide_madds(o)} |"
            if with_sppark:
                s = results[(curve.name, "sppark")][op]
                row += f" {s.integer} | {wide_madds(s)} | {o.integer / s.integer:.2f} |"
            lines.append(row)
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sppark", help="sppark checkout or bare git directory (default: git clone it)")
    ap.add_argument("--ours-only", action="store_true", help="count zkqueue's kernels only")
    ap.add_argument("--max-ratio", type=float, help="exit 1 when any zkqueue/sppark ratio is above this")
    ap.add_argument("--opcodes", action="store_true", help="also print each kernel's integer opcodes")
    args = ap.parse_args()
    nvcc, cuobjdump = find_nvcc(), find_cuobjdump()
    if not nvcc or not cuobjdump:
        print("needs nvcc and cuobjdump (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)", file=sys.stderr)
        return 1
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tree = None if args.ours_only else sppark_tree(args.sppark, work)
        for curve in CURVES:
            results[(curve.name, "ours")] = ours(curve, work, nvcc, cuobjdump)
            if tree:
                results[(curve.name, "sppark")] = sppark(curve, tree, work, nvcc, cuobjdump)
        commit = sppark_commit(args.sppark, tree) if tree else None
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# integer SASS instructions, {ARCH}, longest path, one operation per thread; {version}; {now}")
    if commit:
        print(f"# sppark {commit}")
    print("\n".join(table(results, tree is not None)))
    if args.opcodes:
        for (curve, who), ops in sorted(results.items()):
            for op, c in ops.items():
                print(f"\n{curve} {who} {op}: " + ", ".join(f"{k} {v}" for k, v in c.opcodes.most_common()))
    if args.max_ratio and tree:
        over = [(c.name, op) for c in CURVES for op in OPS
                if results[(c.name, "ours")][op].integer > args.max_ratio * results[(c.name, "sppark")][op].integer]
        if over:
            print(f"above {args.max_ratio}x sppark: {over}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
