"""`zkqueue zkey new | beacon | contribute` and `zkqueue ptau beacon`: the setup's commands,
with snarkjs's positional arguments (groth16/cli.py registers them beside prove and verify)."""

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


def cmd_ptau_beacon(args) -> int:
    from .ptau_beacon import beacon_ptau
    response = beacon_ptau(args.curve, args.power, args.ptau, args.beacon, args.iterations,
                           name=_snarkjs_value(args.name), prepare=not args.no_prepare, threads=args.threads)
    print(f"contribution response hash: {response.hex()}")
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
    t = sub.add_parser("ptau", help="TEST MATERIAL: a public-beacon powers of tau (snarkjs powersoftau ...)")
    ts = t.add_subparsers(dest="ptau_command", required=True)
    pb = ts.add_parser(
        "beacon", help="TEST MATERIAL ONLY: powersoftau new + beacon + prepare phase2 in one, byte-identical to "
                       "snarkjs; anyone can recompute the beacon's secret, so its keys prove nothing",
        description="Writes the .ptau that snarkjs 0.7.6's `powersoftau new CURVE POWER`, `powersoftau beacon "
                    "... HASH ITERATIONS [--name]` and `powersoftau prepare phase2` would (byte-identical), computed "
                    "from the beacon's secrets. TEST MATERIAL ONLY: the secrets (tau, alpha, beta) follow from the "
                    "public beacon hash, so anyone can forge proofs for keys made from this file.")
    pb.add_argument("power", help="2^power constraints (1 .. the curve's 2-adicity - 1)")
    pb.add_argument("ptau", help="the output .ptau")
    pb.add_argument("--curve", default="bn128", help="bn128 (default) or bls12381")
    pb.add_argument("--beacon", required=True, help="the beacon hash: hexadecimal, 1 to 255 bytes")
    pb.add_argument("--iterations", required=True, help="2^N sha256 iterations of the beacon hash (10..63)")
    pb.add_argument("-n", "--name", default=None, help="the contribution's name (snarkjs --name)")
    pb.add_argument("--no-prepare", action="store_true",
                    help="stop after the beacon (no prepare phase2 sections 12-15)")
    pb.set_defaults(func=cmd_ptau_beacon)
    for p in (n, b, c, pb):
        p.add_argument("--threads", type=threads_type, default=None,
                       help="CPU threads (default: $ZKQUEUE_THREADS or all cores)")
