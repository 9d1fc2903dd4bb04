"""The `zkqueue` command line: prove, verify, export-vk and zkey, with snarkjs's positional interface.

Exit codes: 0 success (verify: valid), 1 verify: invalid proof / prove: failure that is not
the input's fault, 2 bad or unreadable input. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import gc
import os
import sys
import time

from .errors import Groth16Error, InputError, UnsatisfiedError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING; argparse loads only when a parser is built
if TYPE_CHECKING:
    import argparse

EXIT_OK, EXIT_INVALID, EXIT_INPUT = 0, 1, 2


def _threads(value: str) -> int:
    n = int(value)
    if n < 1:
        import argparse  # noqa: PLC0415 - only argparse calls this
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


_BACKENDS = ("cpu", "cuda", "auto")  # as groth16.backends.BACKENDS, without importing it here


def _native_cpu(backend: str, verbose: bool) -> bool:
    """True when the prove runs on the CPU, so that it takes the numpy-free native whole-prove:
    --backend cpu, or auto where no GPU is usable (known without importing CuPy when it is
    not installed). --backend cuda, and auto with a usable GPU, take get_backend's path."""
    if backend != "auto":
        return backend == "cpu"
    import importlib.util  # noqa: PLC0415
    from . import backends  # noqa: PLC0415 - light: imports neither numpy nor CuPy
    if backends.cuda_emulated():
        return False
    if importlib.util.find_spec("cupy") is None:
        usable, why = False, "CuPy is not installed"
    else:
        usable, why = backends.cuda_status()
    if not usable:
        _setup_logging(verbose)
        import logging  # noqa: PLC0415 - loaded by groth16.backends already
        logging.getLogger("zkqueue.backend").info("backend auto: using cpu (%s)", why)
    return not usable


def _backend_choice(flag: str | None) -> str:
    """--backend, else $ZKQUEUE_BACKEND (zkqueue.config), else auto.

    Raises:
        InputError: $ZKQUEUE_BACKEND names no backend.
    """
    if flag:
        return flag
    from zkqueue import config  # noqa: PLC0415 - light: os and pathlib only
    chosen = config.process().backend or "auto"
    if chosen not in _BACKENDS:
        raise InputError(f"ZKQUEUE_BACKEND={chosen!r} names no backend", expected=" | ".join(_BACKENDS), found=chosen)
    return chosen


def cmd_prove(args: argparse.Namespace) -> int:
    # A one-shot process: the cyclic GC would only rescan the objects of the imports below.
    gc.disable()
    from .formats import jsonfiles

    t0 = time.perf_counter()
    args.backend = _backend_choice(args.backend)
    if not args.r1cs and _native_cpu(args.backend, args.verbose):
        from . import native_prove
        # the proof's points as the kernels return them: no Python point objects to build
        result = native_prove.prove_lem(args.zkey, args.witness, threads=args.threads)
        curve, proof = result.curve, jsonfiles.proof_json_lem(result.curve, result.pi_a, result.pi_b, result.pi_c)
    else:
        _setup_logging(args.verbose)   # the backends and readers of this path may warn
        result = _prove_with_backend(args)
        curve, proof = result.proof.curve, jsonfiles.proof_json(result.proof)
    jsonfiles.write_json(args.proof, proof)
    jsonfiles.write_public(args.public, result.public_signals)
    if args.verbose:
        steps = " ".join(f"{k}={v:.3f}s" for k, v in result.timings_s.items())
        print(f"proved {curve.name} in {time.perf_counter() - t0:.3f}s ({steps})", file=sys.stderr)
    return EXIT_OK


def _prove_with_backend(args: argparse.Namespace):
    """The backend-op path (groth16/prover.py): CUDA, auto with CuPy installed, and --r1cs."""
    # numpy's OpenBLAS starts a thread per core when it is imported; the prover does no
    # linear algebra, so a one-shot process skips that start-up cost.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from . import backends, prover
    from .formats import r1cs, wtns, zkey

    key = zkey.read_zkey(args.zkey)
    witness = wtns.read_wtns(args.witness)
    prover.check_inputs(key, witness)
    backend = backends.get_backend(args.backend, key.curve, threads=args.threads)
    key.check_points(backend)
    if args.r1cs:
        system = r1cs.read_r1cs(args.r1cs)
        bad = system.first_unsatisfied([wtns.words_to_int(v) for v in witness.values])
        if bad is not None:
            raise UnsatisfiedError(f"the witness does not satisfy constraint {bad} of {args.r1cs}",
                                          path=args.witness, found=bad)
    return prover.prove(key, witness, backend)


def cmd_verify(args: argparse.Namespace) -> int:
    from . import verifier
    from .formats import jsonfiles

    vk = jsonfiles.load_verification_key(args.verification_key)
    public = jsonfiles.load_public(args.public, vk.curve)
    proof = jsonfiles.load_proof(args.proof)
    if verifier.verify(vk, proof, public):
        print("OK: the proof is valid")
        return EXIT_OK
    print("INVALID: the proof does not verify against this key and these public signals")
    return EXIT_INVALID


def cmd_export_vk(args: argparse.Namespace) -> int:
    from . import verifier
    from .formats import jsonfiles, zkey

    key = zkey.read_zkey(args.zkey)
    vk = key.verification_key
    jsonfiles.write_json(args.verification_key,
                         jsonfiles.verification_key_json(vk, verifier.alphabeta_json(vk)))
    return EXIT_OK


def add_commands(sub) -> None:
    """Registers prove, verify and export-vk on an argparse subparsers object.

    The queue's command line (zkqueue/cli.py) adds its own commands beside these.
    """
    p = sub.add_parser("prove", help="prove one witness (snarkjs groth16 prove's arguments)")
    p.add_argument("zkey")
    p.add_argument("witness")
    p.add_argument("proof")
    p.add_argument("public")
    p.add_argument("--backend", choices=_BACKENDS,
                   default=None, help="default: $ZKQUEUE_BACKEND, else auto")
    p.add_argument("--threads", type=_threads, default=None,
                   help="CPU threads (default: $ZKQUEUE_THREADS or all cores)")
    p.add_argument("--r1cs", help="also check the witness against this .r1cs and name a broken constraint")
    p.set_defaults(func=cmd_prove)

    v = sub.add_parser("verify", help="verify a proof: exit 0 valid, 1 invalid, 2 unreadable input")
    v.add_argument("verification_key")
    v.add_argument("public")
    v.add_argument("proof")
    v.set_defaults(func=cmd_verify)

    e = sub.add_parser("export-vk", help="write the verification key of a .zkey")
    e.add_argument("zkey")
    e.add_argument("verification_key")
    e.set_defaults(func=cmd_export_vk)

    from .witness import cli as witness_cli      # light: wasmtime loads when its commands run
    witness_cli.add_commands(sub)
    from .setup import cli as setup_cli          # light: numpy loads when its commands run
    setup_cli.add_commands(sub, _threads)


_PROVE_OPTIONS = {"--backend": _BACKENDS, "--threads": None}   # None: a positive decimal integer


def parse_plain_prove(words: list[str]):
    """The parsed arguments of a plain `[-v] prove ZKEY WITNESS PROOF PUBLIC [--backend B]
    [--threads N]` command line, as argparse would give them (add_commands), or None for
    anything else: help, --r1cs, another command, an abbreviated, repeated or bad flag, a
    missing or extra argument. argparse then parses it, with its own messages, so that this
    only skips building every parser (argparse, gettext, locale: several ms of a one-shot
    prove) where the outcome is certain.
    """
    i, verbose = 0, False
    while i < len(words) and words[i] in ("-v", "--verbose"):
        i, verbose = i + 1, True
    if i == len(words) or words[i] != "prove":
        return None
    options: dict[str, str] = {}
    positional: list[str] = []
    rest = iter(words[i + 1:])
    for word in rest:
        if not word.startswith("-"):
            positional.append(word)
            continue
        name, eq, value = word.partition("=")
        if name not in _PROVE_OPTIONS or name in options:
            return None
        if not eq:
            value = next(rest, None)
            if value is None or value.startswith("-"):
                return None
        options[name] = value
    backend, threads = options.get("--backend"), options.get("--threads")
    if len(positional) != 4 or (backend is not None and backend not in _BACKENDS):
        return None
    if threads is not None:
        if not (threads.isascii() and threads.isdigit() and int(threads) >= 1):
            return None
        threads = int(threads)
    from types import SimpleNamespace  # noqa: PLC0415 - loaded already (by enum, through re)
    zkey, witness, proof, public = positional
    return SimpleNamespace(verbose=verbose, command="prove", zkey=zkey, witness=witness, proof=proof,
                           public=public, backend=backend, threads=threads, r1cs=None, func=cmd_prove)


def new_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The top-level `zkqueue` parser with its global flags, and its (empty) subcommands."""
    from .cli_parser import Parser  # noqa: PLC0415 - argparse: not on a plain prove's path
    parser = Parser(prog="zkqueue", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log timings and choices")
    return parser, parser.add_subparsers(dest="command", required=True)


def _setup_logging(verbose: bool) -> None:
    """Log lines as `zkqueue: message` on stderr, INFO and above with -v, else WARNING."""
    import logging  # noqa: PLC0415
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="zkqueue: %(message)s")


def run_command(args: argparse.Namespace, input_errors: tuple[type[BaseException], ...] = ()) -> int:
    """Runs a parsed command, turning errors into one line on stderr and an exit code.

    `input_errors` adds exception types (beside groth16's InputError) that mean bad input.
    """
    # The native CPU prove logs nothing (-v prints its timings with print): it skips
    # importing logging (and its traceback, weakref, string...), a few ms of a one-shot
    # process's start-up. cmd_prove sets logging up itself before a path that may log.
    if args.command != "prove":
        _setup_logging(args.verbose)
    try:
        return args.func(args)
    except (InputError, *input_errors) as exc:
        print(f"zkqueue: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except Groth16Error as exc:
        print(f"zkqueue: error: {exc}", file=sys.stderr)
        return EXIT_INVALID if args.command != "verify" else EXIT_INPUT
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"zkqueue: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        return 130


def finish(args: argparse.Namespace, code: int, *, as_program: bool) -> int:
    """`code`, or, when the process runs as the `zkqueue` program (`as_program`) and the
    command was `prove`, the exit itself with that code, without tearing the interpreter
    down: a one-shot prove has written and closed its files and holds nothing else, and the
    teardown of its modules and native library costs ~10 ms (3% of a 2^14 prove)."""
    if as_program and args.command == "prove":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def main(argv: list[str] | None = None) -> int:
    """Runs the command line `argv` (default: this process's arguments, as the program)."""
    args = parse_plain_prove(sys.argv[1:] if argv is None else argv)
    if args is not None:
        return finish(args, run_command(args), as_program=argv is None)
    parser, sub = new_parser()
    add_commands(sub)
    args = parser.parse_args(argv)
    return finish(args, run_command(args), as_program=argv is None)


if __name__ == "__main__":
    sys.exit(main())
