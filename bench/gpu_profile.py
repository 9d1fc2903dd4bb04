"""Where one MSM's time goes, and the runs that ncu and compute-sanitizer wrap (gpu_check.sh's
profile step).

    python3 bench/gpu_profile.py phases [--curve bn128] [--log2 24] [--json F] [--emulate]
    python3 bench/gpu_profile.py run msm|ntt [--curve bn128] [--log2 22] [--emulate]
    python3 bench/gpu_profile.py ncu-summary REPORT.csv [--json F]

phases: one G1 MSM with its points resident on the device (as for a proving key's second
partition), after a warm-up, split by CUDA events recorded around every kernel launch into
sort (msm_count, msm_scatter, msm_unit_map), accumulate (msm_accumulate_*), unit tree (msm_unit_tree_*,
msm_gather_*), bucket reduction (msm_bucket_segments_*, msm_sum_rows_*) and window combination
(msm_combine_*); "between" is the rest of the MSM's span on the device: CuPy's cumsum, zeros and
copies and the gaps between launches. The result is checked exactly (the points are fixture points
tiled, bench/gpu_fold.py), so a wrong kernel cannot hide behind a good time. With --emulate
(the dry run) the same split is taken with the host clock around each emulated launch.

run: one MSM (G1) or one forward NTT after nothing else, for `ncu --kernel-name ...` and
`compute-sanitizer --tool racecheck` to wrap.

ncu-summary: from `ncu --csv --page details` output, each kernel's achieved occupancy, the
utilisation of the pipes the integer work issues to (ALU, FMA: IMAD runs there) and the top
stall reasons, as JSON.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gpu_kernels  # noqa: E402
from gpu_fold import fold_scalars  # noqa: E402
from zkqueue.groth16 import curves  # noqa: E402

# Phase of each kernel, by name prefix (the MSM's launches, cuda_msm.py).
PHASES = (("sort", ("msm_count", "msm_scatter", "msm_unit_map")),
          ("accumulate", ("msm_accumulate_",)),
          ("unit tree", ("msm_unit_tree_", "msm_gather_")),
          ("bucket reduction", ("msm_bucket_segments_", "msm_sum_rows_")),
          ("window combination", ("msm_combine_",)))


def phase_of(kernel: str) -> str:
    for phase, prefixes in PHASES:
        if kernel.startswith(prefixes):
            return phase
    return "other kernels"


class EventClock:
    """Marks on the device's current stream (CUDA events); ms between two marks."""

    def __init__(self, cupy):
        self.cp = cupy

    def mark(self):
        ev = self.cp.cuda.Event()
        ev.record()
        return ev

    def finish(self, last) -> None:
        last.synchronize()

    def ms(self, a, b) -> float:
        return self.cp.cuda.get_elapsed_time(a, b)


class HostClock:
    """The emulation runs each launch to its end before returning: the host clock will do."""

    def mark(self):
        return time.perf_counter()

    def finish(self, last) -> None:
        pass

    def ms(self, a, b) -> float:
        return (b - a) * 1e3


def split_msm(be, clock, points, scalars) -> tuple[bytes, dict]:
    """One MSM on `be` with a mark before and after each launch; (result, split in ms)."""
    launches = []
    original = be.launch

    def timed_launch(name, threads, *args, **kw):
        t0 = clock.mark()
        original(name, threads, *args, **kw)
        launches.append((name, t0, clock.mark()))

    be.launch = timed_launch
    try:
        start = clock.mark()
        result = be.msm_g1(points, scalars)   # reads the result back: ends after the last kernel
        end = clock.mark()
        clock.finish(end)
    finally:
        del be.launch   # the instance attribute: back to the class's method
    per_phase: dict[str, float] = defaultdict(float)
    per_kernel: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for name, a, b in launches:
        ms = clock.ms(a, b)
        per_phase[phase_of(name)] += ms
        per_kernel[name][0] += 1
        per_kernel[name][1] += ms
    total = clock.ms(start, end)
    split = {"total_ms": total, "launches": len(launches),
             "phases_ms": {p: per_phase.get(p, 0.0) for p, _ in PHASES},
             "between_ms": total - sum(per_phase.values()),
             "kernels": {k: {"launches": n, "ms": ms} for k, (n, ms) in sorted(per_kernel.items())}}
    if "other kernels" in per_phase:
        split["phases_ms"]["other kernels"] = per_phase["other kernels"]
    return result, split


def phases(args) -> int:
    curve = curves.by_name(args.curve)
    be = gpu_kernels.make_backend(curve, args.emulate)
    clock = HostClock() if args.emulate else EventClock(be.xp)
    points, scalars = gpu_kernels.msm_inputs(curve, False, args.log2)
    be.msm_g1(points, scalars)   # warm-up: the points go to the device and stay there
    result, split = split_msm(be, clock, points, scalars)
    base = gpu_kernels.base_points(curve, False)
    cpu = gpu_kernels.cpu_backend(curve, None)
    want = cpu.msm_g1(base, fold_scalars(scalars, len(base), curve.r))
    split.update({"curve": curve.name, "log2": args.log2, "emulated": args.emulate, "ok": result == want,
                  "device": "host emulation" if args.emulate else be.rt.describe()})
    line = ", ".join(f"{p} {ms:.2f}" for p, ms in split["phases_ms"].items())
    print(f"msm_g1 {curve.name} 2^{args.log2}: {split['total_ms']:.2f} ms in {split['launches']} launches "
          f"({line}, between {split['between_ms']:.2f}) ms; {'exact' if split['ok'] else 'WRONG RESULT'}")
    if args.json:
        Path(args.json).write_text(json.dumps(split, indent=1))
    return 0 if split["ok"] else 1


def run(args) -> int:
    curve = curves.by_name(args.curve)
    be = gpu_kernels.make_backend(curve, args.emulate)
    if args.what == "msm":
        points, scalars = gpu_kernels.msm_inputs(curve, False, args.log2)
        be.msm_g1(points, scalars)
    else:
        be.ntt(gpu_kernels.ntt_input(curve, args.log2))
    be.rt.synchronize()
    print(f"ran {args.what} {curve.name} 2^{args.log2}")
    return 0


# ---- ncu --csv --page details ----------------------------------------------------------------

def ncu_rows(text: str) -> list[dict]:
    """The metric rows of `ncu --csv --page details` (ncu's own log lines before the CSV, which
    start with '==', are skipped)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def _value(v: str) -> float | None:
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return None


def ncu_summary(text: str) -> dict:
    """{kernel: {occupancy, pipes, stalls (top 3), metrics}} from ncu's details CSV."""
    out: dict[str, dict] = {}
    for row in ncu_rows(text):
        kernel = row.get("Kernel Name", "?").split("(")[0]
        name, unit, value = row.get("Metric Name", ""), row.get("Metric Unit", ""), row.get("Metric Value", "")
        k = out.setdefault(kernel, {"occupancy": {}, "pipes": {}, "stalls": {}, "metrics": {}})
        k["metrics"][f"{row.get('Section Name', '')}: {name}"] = f"{value} {unit}".strip()
        low = name.lower()
        num = _value(value)
        if "stall" in low:   # first: "Stall Math Pipe Throttle" is a stall, not a pipe
            if num is not None:
                k["stalls"][name] = num
        elif "occupancy" in low:
            k["occupancy"][name] = num
        elif "pipe" in low or "issue slots" in low or low.startswith("executed ipc") or low == "sm busy":
            k["pipes"][name] = num
    for k in out.values():
        k["top_stalls"] = sorted(k["stalls"].items(), key=lambda kv: -kv[1])[:3]
    return out


def ncu_cmd(args) -> int:
    summary = ncu_summary(Path(args.report).read_text())
    if not summary:
        print(f"{args.report}: no ncu metric rows", file=sys.stderr)
        return 1
    for kernel, k in summary.items():
        occ = ", ".join(f"{n} {v}" for n, v in k["occupancy"].items())
        pipes = ", ".join(f"{n} {v}" for n, v in k["pipes"].items())
        stalls = ", ".join(f"{n} {v}" for n, v in k["top_stalls"])
        print(f"{kernel}: occupancy: {occ or '-'}; pipes: {pipes or '-'}; top stalls: {stalls or '-'}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("phases")
    p.add_argument("--curve", default="bn128")
    p.add_argument("--log2", type=int, default=24)
    p.add_argument("--json")
    p.add_argument("--emulate", action="store_true")
    r = sub.add_parser("run")
    r.add_argument("what", choices=("msm", "ntt"))
    r.add_argument("--curve", default="bn128")
    r.add_argument("--log2", type=int, default=22)
    r.add_argument("--emulate", action="store_true")
    n = sub.add_parser("ncu-summary")
    n.add_argument("report")
    n.add_argument("--json")
    args = ap.parse_args()
    return {"phases": phases, "run": run, "ncu-summary": ncu_cmd}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
