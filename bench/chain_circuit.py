#!/usr/bin/env python3
"""A bn128 multiplication-chain circuit of exactly 2^LOG2 domain points, written straight as a
.r1cs with its witness (.wtns), without circom or node: for machines that have neither (the
GPU machine: bench/gpu_check.sh's bigkey step).

The circuit is make_fixture.sh's chain: public inputs pub[4], private x, outputs out and mid;
s[0] = x, s[i+1] = s[i] * (s[i] + pub[i % 4]), mid = s[N] * pub[0], and out = s[N] + x kept
as a constraint of its own (1 * (s[N] + x) = out). Wires as circom orders them: 1, out, mid,
pub[0..3], x, s[1..N]; nConstraints + nPublic + 1 = 2^LOG2.

    python bench/chain_circuit.py --log2 22 --out DIR     # DIR/circuit.r1cs, witness.wtns, input.json, public.json
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

R = 0x30644E72E131A029B85045B68181585D2833E84879B9709143E1F593F0000001   # bn128's scalar field
NPUB_IN, NOUT = 4, 2
ONE = (1).to_bytes(32, "little")


def chain_length(log2: int) -> int:
    """Multiplications so that (N + 2 constraints) + 6 public + 1 = 2^log2."""
    return (1 << log2) - 1 - (NPUB_IN + NOUT) - 2


def section(stype: int, body: bytes) -> bytes:
    return struct.pack("<IQ", stype, len(body)) + body


def write_r1cs(path: Path, n: int) -> None:
    """The chain's .r1cs (standard-form coefficients, one wire per label)."""
    n_wires = 8 + n
    n_constraints = n + 2
    hdr = (struct.pack("<I", 32) + R.to_bytes(32, "little")
           + struct.pack("<IIIIQI", n_wires, NOUT, NPUB_IN, 1, n_wires, n_constraints))
    # One chain constraint, 156 bytes: A = s_i, B = s_i + pub_(i%4), C = s_(i+1), every coefficient 1.
    rec = np.zeros((n, 156), dtype=np.uint8)
    i = np.arange(n, dtype=np.uint32)
    s_i = np.where(i == 0, 7, 7 + i).astype(np.uint32)          # s_0 is x (wire 7)

    def put_u32(col: int, values) -> None:
        v = np.ascontiguousarray(np.broadcast_to(np.asarray(values, dtype="<u4"), (n,)))
        rec[:, col:col + 4] = v.view(np.uint8).reshape(n, 4)

    one = np.frombuffer(ONE, dtype=np.uint8)
    put_u32(0, 1)
    put_u32(4, s_i)
    rec[:, 8:40] = one
    put_u32(40, 2)
    put_u32(44, s_i)
    rec[:, 48:80] = one
    put_u32(80, 3 + (i % 4))
    rec[:, 84:116] = one
    put_u32(116, 1)
    put_u32(120, 7 + i + 1)
    rec[:, 124:156] = one
    s_n = 7 + n

    def lc(*wires: int) -> bytes:
        return struct.pack("<I", len(wires)) + b"".join(struct.pack("<I", w) + ONE for w in wires)

    tail = lc(s_n) + lc(3) + lc(2)                      # mid = s_N * pub[0]
    tail += lc(0) + lc(s_n, 7) + lc(1)                 # out = 1 * (s_N + x)
    labels = np.arange(n_wires, dtype="<u8").tobytes()
    with open(path, "wb") as f:
        f.write(b"r1cs" + struct.pack("<II", 1, 3))
        f.write(section(1, hdr))
        f.write(struct.pack("<IQ", 2, rec.nbytes + len(tail)))
        f.write(rec.tobytes())
        f.write(tail)
        f.write(section(3, labels))


def write_witness(path: Path, n: int, pub: list[int], x: int) -> list[int]:
    """The .wtns (version 2) of the chain for these inputs; returns the public signals."""
    vals = bytearray()
    s = x
    for i in range(n):
        s = s * (s + pub[i & 3]) % R
        vals += s.to_bytes(32, "little")
    out, mid = (s + x) % R, s * pub[0] % R
    head = b"".join(v.to_bytes(32, "little") for v in (1, out, mid, *pub, x))
    with open(path, "wb") as f:
        f.write(b"wtns" + struct.pack("<II", 2, 2))
        f.write(section(1, struct.pack("<I", 32) + R.to_bytes(32, "little") + struct.pack("<I", 8 + n)))
        f.write(struct.pack("<IQ", 2, len(head) + len(vals)))
        f.write(head)
        f.write(vals)
    return [out, mid, *pub]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2", type=int, required=True, help="4..28")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if not 4 <= args.log2 <= 28:
        print("chain_circuit.py: --log2 must be 4..28", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    n = chain_length(args.log2)
    pub, x = [3, 5, 7, 9], 7
    write_r1cs(args.out / "circuit.r1cs", n)
    public = write_witness(args.out / "witness.wtns", n, pub, x)
    (args.out / "input.json").write_text(json.dumps({"pub": [str(p) for p in pub], "x": str(x)}))
    (args.out / "public.json").write_text(json.dumps([str(v) for v in public]))
    print(f"chain_circuit: 2^{args.log2}: {n} multiplications, {n + 2} constraints, {8 + n} wires -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
