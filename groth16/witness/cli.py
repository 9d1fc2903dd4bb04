"""`zkqueue wtns calculate` and `zkqueue fullprove`, with snarkjs's positional arguments.

    zkqueue wtns calculate circuit.wasm input.json witness.wtns
    zkqueue fullprove input.json circuit.wasm circuit.zkey proof.json public.json

The circuit's log() lines go to stdout, as snarkjs prints them. Bad inputs exit 2 with one line
naming the input file, and nothing is written. wasmtime and the prover load only when a command
runs, so that `zkqueue --help` and the other commands stay quick.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

EXIT_OK = 0


def _print_log(line: str) -> None:
    print(line, flush=True)


def cmd_wtns_calculate(args: argparse.Namespace) -> int:
    from .calculator import calculate_witness

    t0 = time.perf_counter()
    calculate_witness(args.wasm, args.input, args.witness, log=_print_log)
    if args.verbose:
        print(f"witness {args.witness} in {time.perf_counter() - t0:.3f}s", file=sys.stderr)
    return EXIT_OK


def cmd_fullprove(args: argparse.Namespace) -> int:
    # as `prove` does: numpy's OpenBLAS would start a thread per core, and nothing here uses it
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .. import backends, prover
    from ..formats import jsonfiles, zkey
    from zkqueue import config

    from .calculator import load_calculator
    from .inputs import read_inputs

    t0 = time.perf_counter()
    inputs = read_inputs(args.input)
    calc = load_calculator(args.wasm)
    t1 = time.perf_counter()
    # The witness first: a bad input fails before a large .zkey is read.
    witness = calc.calculate_witness(inputs, source=args.input, log=_print_log)
    t2 = time.perf_counter()
    key = zkey.read_zkey(args.zkey)
    prover.check_inputs(key, witness)
    backend = backends.get_backend(args.backend or config.process().backend, key.curve, threads=args.threads)
    key.check_points(backend)
    result = prover.prove(key, witness, backend)
    jsonfiles.write_json(args.proof, jsonfiles.proof_json(result.proof))
    jsonfiles.write_public(args.public, result.public_signals)
    if args.verbose:
        print(f"fullprove {key.curve.name} n={key.domain_size}: circuit {t1 - t0:.3f}s witness {t2 - t1:.3f}s "
              f"key + prove {time.perf_counter() - t2:.3f}s", file=sys.stderr)
    return EXIT_OK


def _threads(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def add_commands(sub) -> None:
    """Registers `wtns calculate` and `fullprove` on an argparse subparsers object."""
    w = sub.add_parser("wtns", help="witness files: `wtns calculate` (snarkjs's arguments)")
    wsub = w.add_subparsers(dest="wtns_command", required=True)
    c = wsub.add_parser("calculate", help="compute a .wtns from a circom circuit's .wasm and input.json")
    c.add_argument("wasm", help="the circuit's .wasm (circom --wasm: circuit_js/circuit.wasm)")
    c.add_argument("input", help="input.json: signal names to values")
    c.add_argument("witness", help="the .wtns to write")
    c.set_defaults(func=cmd_wtns_calculate)

    f = sub.add_parser("fullprove", help="compute the witness and prove it (snarkjs groth16 fullprove's arguments)")
    f.add_argument("input")
    f.add_argument("wasm")
    f.add_argument("zkey")
    f.add_argument("proof")
    f.add_argument("public")
    f.add_argument("--backend", choices=("cpu", "cuda", "auto"), default=None,
                   help="default: $ZKQUEUE_BACKEND or auto")
    f.add_argument("--threads", type=_threads, default=None,
                   help="CPU threads (default: $ZKQUEUE_THREADS or all cores)")
    f.set_defaults(func=cmd_fullprove)
