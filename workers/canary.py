"""The canary: before a worker takes any work, it proves a small bundled circuit of each curve
on its own backend and verifies the proofs.

A build that computes wrong proofs (a binary other than the one tested, a miscompiled
kernel, a failing device) is otherwise found only after it has taken real partitions and
produced invalid proofs that other workers must prove again. The canary costs one proof of a
2^6 circuit per curve (zkqueue/canary_data: real circom + snarkjs keys and witnesses) through
the same path a partition takes (workers/proving.PartitionProver, with this worker's backend
and, in tests, its build-defect faults), in a process of its own, so that CUDA is never
initialised in the worker's parent process and a hung kernel costs a timeout, not the worker.

    python -m zkqueue.workers.canary --backend cpu [--threads N]    # exit 0 passed, ExitCode.CANARY failed

A failure is a line on stdout naming the curve and what went wrong. It does not catch every
bad build (a defect only large inputs reach passes it): the worker's check of every proof,
finalize and the quarantine remain.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .exit_codes import ExitCode

CURVES = ("bn128", "bls12381")


@dataclass(frozen=True)
class CanaryResult:
    """What the canary found: `ok`, how long it took, and why it failed (empty when ok)."""
    ok: bool
    seconds: float
    reason: str = ""
    crashed: bool = False   # the canary could not run to a verdict (killed, timed out): no fault of the build


def canary_files(curve: str) -> tuple[Path, Path]:
    """(proving key, witness) of the bundled canary circuit of `curve`."""
    folder = _data_folder() / curve
    return folder / "circuit_final.zkey", folder / "witness.wtns"


def _data_folder() -> Path:
    # Installed: zkqueue/canary_data beside zkqueue/config.py; from the repository, the same
    # folder (workers/ is mapped beneath zkqueue/ only in an install).
    from zkqueue import config
    return Path(config.__file__).resolve().parent / "canary_data"


def prove_here(backend_kind: str, threads: int | None, fault_spec: str) -> CanaryResult:
    """Proves and verifies each curve's canary in this process; the first failure wins."""
    from zkqueue.groth16.errors import Groth16Error
    from zkqueue.workers import faults
    from zkqueue.workers.proving import PartitionProver

    t0 = time.perf_counter()
    prover = PartitionProver(backend_kind, threads=threads, cache_bytes=64 << 20,
                             faults=faults.parse(fault_spec).build_defects())
    for curve in CURVES:
        zkey, wtns = canary_files(curve)
        try:
            proved = prover.prove(f"canary-{curve}", lambda z=zkey: z, wtns, attempt=1, stop=threading.Event())
        except Groth16Error as exc:     # SelfCheckFailed (an invalid proof) is one of these
            return CanaryResult(False, time.perf_counter() - t0, f"{curve}: {exc}")
        except Exception as exc:        # noqa: BLE001 - anything else a broken build raises
            return CanaryResult(False, time.perf_counter() - t0, f"{curve}: {type(exc).__name__}: {exc}")
        if proved is None:
            return CanaryResult(False, time.perf_counter() - t0, f"{curve}: the proof was stopped")
    return CanaryResult(True, time.perf_counter() - t0)


def run(backend_kind: str, threads: int | None, *, env: dict | None = None, timeout_s: float = 300.0) -> CanaryResult:
    """Runs the canary in a child process (its environment `env`: the worker's, faults
    included) and returns what it found; a child that hangs past `timeout_s` or dies fails it."""
    cmd = [sys.executable, "-m", "zkqueue.workers.canary", "--backend", backend_kind]
    if threads:
        cmd += ["--threads", str(threads)]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return CanaryResult(False, time.monotonic() - t0, f"the canary proof did not finish within {timeout_s:g} s "
                            "(a hung kernel?)")
    if proc.returncode < 0:     # killed (the OOM killer, an operator): no verdict on the build
        return CanaryResult(False, time.monotonic() - t0, f"the canary process was killed by signal {-proc.returncode}",
                            crashed=True)
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        return CanaryResult(bool(found["ok"]), float(found["seconds"]), str(found["reason"]))
    except (IndexError, ValueError, KeyError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return CanaryResult(False, time.monotonic() - t0,
                            f"the canary process exited with status {proc.returncode}: {' | '.join(tail)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m zkqueue.workers.canary", description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", required=True, choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    from zkqueue import config
    result = prove_here(args.backend, args.threads, config.process().fault)
    print(json.dumps({"ok": result.ok, "seconds": round(result.seconds, 3), "reason": result.reason}))
    return ExitCode.OK if result.ok else ExitCode.CANARY


if __name__ == "__main__":
    sys.exit(main())
