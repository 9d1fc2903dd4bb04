"""`zkqueue zkey new | beacon | contribute`: the phase-2 setup's commands, with snarkjs's
positional arguments (groth16/cli.py registers them beside prove and verify)."""

from __future__ import annotations


def _snarkjs_value(v: str | None) -> str | None:
    """snarkjs takes options as `-n=NAME`; argparse reads that as "=NAME": drop the "="."""
    return v[1:] if v is not None and v.startswith("=") else v


def cmd_new(args) -> int:
    from .zkey_new import new_zkey
    new_zkey(args.r1cs, args.ptau, args.zkey, threads=args.threads)
    return 0


def cmd_beacon(args) -> int:
    from .contribution import beacon
    beacon(args.zkey_in, args.zkey_out, args.beacon_hash, args.num_iterations_exp, name=_snarkjs_value(args.name),
           threads=args.threads)
    return 0


def cmd_contribute(args) -> int:
    from .contribution import contribute
    contribute(args.zkey_in, args.zkey_out, name=_snarkjs_value(args.name), entropy=_snarkjs_value(args.entropy), threads=args.threads)
    return 0


def add_commands(sub, threads_type) -> None:
    """Registers `zkey new|beacon|contribute` on an argparse subparsers object."""
    z = sub.add_parser("zkey", help="Groth16 phase-2 setup: new, beacon, contribute (snarkjs zkey ...)")
    zs = z.add_subparsers(dest="zkey_command", required=True)
    n = zs.add_parser("new", help="the initial .zkey of a circuit (snarkjs groth16 setup / zkey new)")
    n.add_argument("r1cs")
    n.add_argument("ptau", help="a prepared powers of tau (snarkjs powersoftau prepare phase2)")
    n.add_argument("zkey")
    n.set_defaults(func=cmd_new)
    b = zs.add_parser("beacon", help="apply a beacon contribution (deterministic, as snarkjs zkey beacon)")
    b.add_argument("zkey_in")
    b.add_argument("zkey_out")
    b.add_argument("beacon_hash", help="hexadecimal, up to 255 bytes")
    b.add_argument("num_iterations_exp", help="2^N sha256 iterations of the beacon hash (10..63)")
    b.add_argument("-n", "--name", default=None, help="the contribution's name")
    b.set_defaults(func=cmd_beacon)
    c = zs.add_parser("contribute", help="add a contribution with randomness from the OS")
    c.add_argument("zkey_in")
    c.add_argument("zkey_out")
    c.add_argument("-n", "--name", default=None, help="the contribution's name")
    c.add_argument("-e", "--entropy", default=None, help="extra entropy, mixed with 64 bytes from the OS")
    c.set_defaults(func=cmd_contribute)
    for p in (n, b, c):
        p.add_argument("--threads", type=threads_type, default=None,
                       help="CPU threads (default: $ZKQUEUE_THREADS or all cores)")
