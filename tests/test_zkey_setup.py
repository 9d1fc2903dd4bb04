"""`zkqueue zkey new | beacon | contribute` against snarkjs 0.7.6, run here.

Every comparison is with a file snarkjs writes in the test itself from the same inputs:
`zkey new` and `zkey beacon` must be byte-identical (sha256), a `zkey contribute` output must
pass `snarkjs zkey verify` and prove witnesses that `snarkjs groth16 verify` accepts, and
bad input must be one line naming the file and the problem, with exit code 2.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, snarkjs, zkqueue

BEACON = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"

# (circuit folder under tests/fixtures, its curve): both curves, both families, and
# circom's own test circuit (circom_runtime's Multiplier(1000), from the snarkjs install).
CIRCUITS = [
    ("bn128_chain_10", "bn128"),
    ("bls12381_chain_10", "bls12381"),
    ("bn128_poseidon_10", "bn128"),
    ("bls12381_poseidon_10", "bls12381"),
    ("circom_runtime_multiplier", "bn128"),
    ("bls12381_chain_12", "bls12381"),   # domain 2^12 with the power-12 .ptau: no spare power
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ptau(curve: str) -> Path:
    return FIXTURES / "ptau" / f"{curve}_p12.ptau"


def zkqueue_program(*args) -> subprocess.CompletedProcess:
    """The installed `zkqueue` command's entry (zkqueue.cli.main), as a user runs it."""
    return subprocess.run([sys.executable, "-c", "import sys; from zkqueue.cli import main; "
                           "sys.exit(main())", *map(str, args)], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def snarkjs_keys(tmp_path_factory) -> dict[str, Path]:
    """snarkjs's `zkey new` output for every circuit of CIRCUITS, made now."""
    base = tmp_path_factory.mktemp("snarkjs_keys")
    out = {}
    for name, curve in CIRCUITS:
        out[name] = base / f"{name}.zkey"
        snarkjs("zkey", "new", FIXTURES / name / "circuit.r1cs", ptau(curve), out[name])
    return out


@pytest.mark.parametrize("name,curve", CIRCUITS, ids=[c[0] for c in CIRCUITS])
def test_zkey_new_is_byte_identical_to_snarkjs(name, curve, snarkjs_keys, tmp_path):
    mine = tmp_path / "mine.zkey"
    proc = zkqueue_program("zkey", "new", FIXTURES / name / "circuit.r1cs", ptau(curve), mine)
    assert proc.returncode == 0, proc.stderr
    assert mine.stat().st_size == snarkjs_keys[name].stat().st_size
    assert sha256(mine) == sha256(snarkjs_keys[name])


@pytest.mark.parametrize("name", ["bn128_chain_10", "bls12381_poseidon_10", "circom_runtime_multiplier"])
def test_zkey_beacon_is_byte_identical_to_snarkjs(name, snarkjs_keys, tmp_path):
    ref, mine = tmp_path / "ref.zkey", tmp_path / "mine.zkey"
    snarkjs("zkey", "beacon", snarkjs_keys[name], ref, BEACON, "10", "-n=final beacon")
    proc = zkqueue("zkey", "beacon", snarkjs_keys[name], mine, BEACON, "10", "-n", "final beacon")
    assert proc.returncode == 0, proc.stderr
    assert sha256(mine) == sha256(ref)
    # without a name, and with another exponent
    snarkjs("zkey", "beacon", snarkjs_keys[name], ref, BEACON[::-1], "11")
    assert zkqueue("zkey", "beacon", snarkjs_keys[name], mine, BEACON[::-1], "11").returncode == 0
    assert sha256(mine) == sha256(ref)


@pytest.mark.parametrize("name,curve", [("bn128_chain_10", "bn128"), ("bls12381_poseidon_10", "bls12381")])
def test_contribute_passes_snarkjs_verify_and_its_proofs_verify(name, curve, tmp_path):
    """new -> contribute (OS entropy) -> contribute -> beacon, all by zkqueue: snarkjs verifies
    the chain of contributions against the circuit and the .ptau, a beacon on top is still
    byte-identical to snarkjs's, and a proof with the final key passes snarkjs's verifier."""
    r1cs, k0, k1, k2 = FIXTURES / name / "circuit.r1cs", tmp_path / "k0.zkey", tmp_path / "k1.zkey", tmp_path / "k2.zkey"
    assert zkqueue("zkey", "new", r1cs, ptau(curve), k0).returncode == 0
    assert zkqueue("zkey", "contribute", k0, k1, "-n", "first", "-e", "some entropy").returncode == 0
    proc = zkqueue("zkey", "contribute", k0, tmp_path / "again.zkey", "-n", "first", "-e", "some entropy")
    assert proc.returncode == 0
    assert sha256(tmp_path / "again.zkey") != sha256(k1), "the OS randomness must make each contribution new"
    assert zkqueue("zkey", "contribute", k1, k2, "-n=second é").returncode == 0
    verify = snarkjs("zkey", "verify", r1cs, ptau(curve), k2, check=False)
    assert verify.returncode == 0 and "ZKey Ok!" in verify.stdout, verify.stdout[-2000:]
    # a beacon over zkqueue's contributions: snarkjs's and zkqueue's agree byte for byte
    ref, final = tmp_path / "ref.zkey", tmp_path / "final.zkey"
    snarkjs("zkey", "beacon", k2, ref, BEACON, "10")
    assert zkqueue("zkey", "beacon", k2, final, BEACON, "10").returncode == 0
    assert sha256(final) == sha256(ref)
    # the key proves: zkqueue's proof with it passes snarkjs's verifier
    vk, proof, public = tmp_path / "vk.json", tmp_path / "proof.json", tmp_path / "public.json"
    snarkjs("zkey", "export", "verificationkey", final, vk)
    assert zkqueue("prove", final, FIXTURES / name / "witness.wtns", proof, public).returncode == 0
    ok = snarkjs("groth16", "verify", vk, public, proof, check=False)
    assert ok.returncode == 0 and "OK" in ok.stdout


# -- bad input: one line naming the file and the problem, exit code 2 -----------------------------

@pytest.fixture(scope="module")
def small_ptaus(tmp_path_factory) -> dict[str, Path]:
    """A prepared power-8 .ptau (too small for the 2^10 circuits) and an unprepared power-10 one."""
    d = tmp_path_factory.mktemp("ptau")
    snarkjs("powersoftau", "new", "bn128", "8", d / "p8_raw.ptau")
    snarkjs("powersoftau", "prepare", "phase2", d / "p8_raw.ptau", d / "p8.ptau")
    snarkjs("powersoftau", "new", "bn128", "10", d / "p10_raw.ptau")
    return {"p8": d / "p8.ptau", "p10_raw": d / "p10_raw.ptau"}


def assert_input_error(proc: subprocess.CompletedProcess, path: Path, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(path) in lines[0], lines[0]
    for w in words:
        assert w in lines[0], lines[0]


def test_ptau_too_small(small_ptaus, tmp_path):
    r1cs = FIXTURES / "bn128_chain_10" / "circuit.r1cs"
    # snarkjs refuses it too (it logs the error, exits 0 and leaves a header-only file)
    ref = snarkjs("zkey", "new", r1cs, small_ptaus["p8"], tmp_path / "ref.zkey", check=False)
    assert "circuit too big for this power of tau ceremony" in ref.stdout
    proc = zkqueue_program("zkey", "new", r1cs, small_ptaus["p8"], tmp_path / "out.zkey")
    assert_input_error(proc, small_ptaus["p8"], "too small", "power 10", "power 8")
    assert not (tmp_path / "out.zkey").exists()


def test_unprepared_ptau(small_ptaus, tmp_path):
    proc = zkqueue("zkey", "new", FIXTURES / "bn128_chain_10" / "circuit.r1cs", small_ptaus["p10_raw"],
                   tmp_path / "out.zkey")
    assert_input_error(proc, small_ptaus["p10_raw"], "not prepared")


def test_curve_mismatch(tmp_path):
    r1cs = FIXTURES / "bls12381_chain_10" / "circuit.r1cs"
    proc = zkqueue("zkey", "new", r1cs, ptau("bn128"), tmp_path / "out.zkey")
    assert_input_error(proc, r1cs, "curve mismatch", "bls12381", "bn128")


@pytest.mark.parametrize("which", ["r1cs", "ptau", "zkey"])
def test_truncated_file(which, tmp_path, snarkjs_keys):
    src = {"r1cs": FIXTURES / "bn128_chain_10" / "circuit.r1cs", "ptau": ptau("bn128"),
           "zkey": snarkjs_keys["bn128_chain_10"]}[which]
    cut = tmp_path / f"cut.{which}"
    data = src.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    if which == "zkey":
        proc = zkqueue("zkey", "beacon", cut, tmp_path / "out.zkey", BEACON, "10")
    elif which == "r1cs":
        proc = zkqueue("zkey", "new", cut, ptau("bn128"), tmp_path / "out.zkey")
    else:
        proc = zkqueue("zkey", "new", FIXTURES / "bn128_chain_10" / "circuit.r1cs", cut, tmp_path / "out.zkey")
    assert_input_error(proc, cut, "truncated")
    assert not (tmp_path / "out.zkey").exists()


def test_constraint_section_cut_inside_a_constraint(tmp_path):
    """A .r1cs whose section sizes agree with the file but whose constraint section ends
    inside a constraint (its header promises more constraints than it holds)."""
    import struct
    src = (FIXTURES / "bn128_chain_10" / "circuit.r1cs").read_bytes()
    # find the header section (type 1) and bump nConstraints, its last u32
    pos = 12
    while True:
        (stype, size) = struct.unpack_from("<IQ", src, pos)
        pos += 12 + size
        if stype == 1:
            break
    end = pos
    (n_constraints,) = struct.unpack_from("<I", src, end - 4)
    bad = bytearray(src)
    struct.pack_into("<I", bad, end - 4, n_constraints + 1)
    path = tmp_path / "more.r1cs"
    path.write_bytes(bytes(bad))
    proc = zkqueue("zkey", "new", path, ptau("bn128"), tmp_path / "out.zkey")
    assert_input_error(proc, path, "constraint section ends inside constraint")


def test_bad_beacon_arguments(snarkjs_keys, tmp_path):
    key = snarkjs_keys["bn128_chain_10"]
    proc = zkqueue("zkey", "beacon", key, tmp_path / "o.zkey", "0x" + BEACON, "10")
    assert proc.returncode == 2 and "beacon hash" in proc.stderr
    proc = zkqueue("zkey", "beacon", key, tmp_path / "o.zkey", BEACON, "9")
    assert proc.returncode == 2 and "10 to 63" in proc.stderr
    assert not (tmp_path / "o.zkey").exists()


def test_an_output_that_cannot_be_written(tmp_path):
    missing = tmp_path / "no" / "such" / "dir" / "out.zkey"
    proc = zkqueue("zkey", "new", FIXTURES / "bn128_chain_10" / "circuit.r1cs", ptau("bn128"), missing)
    assert_input_error(proc, missing, "No such file or directory")


# -- the circuit hash's read past the tau powers ------------------------------------------------

WASM_SUB = """
import {{ buildBn128, buildBls12381 }} from "{ffjs}";
const curve = process.argv[2] === "bn128" ? await buildBn128(true) : await buildBls12381(true);
for (const line of process.argv.slice(3)) {{
    const [ha, hb] = line.split(":");
    const r = curve.G1.toAffine(curve.G1.sub(Uint8Array.from(Buffer.from(ha, "hex")),
                                             Uint8Array.from(Buffer.from(hb, "hex"))));
    const u = new Uint8Array(curve.G1.F.n8 * 2);
    curve.G1.toRprUncompressed(u, 0, r);
    console.log(Buffer.from(u).toString("hex"));
}}
process.exit(0);
"""


@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
def test_read_past_the_tau_powers_matches_wasmcurves(curve, tmp_path):
    """wasm_overrun.sub_affine_u against ffjavascript's own G1.sub on bytes that are not a
    point (a section header and tauG2 bytes, as snarkjs reads them, and random bytes): the
    integer-exact arithmetic is what makes `zkey new` byte-identical with a .ptau of exactly
    the circuit's power from 2^15 on (also checked whole by bench/setup_vs_snarkjs at 2^16)."""
    import random
    import struct as st

    from conftest import NODE_MODULES, _require
    from zkqueue.groth16 import curves
    from zkqueue.groth16.setup.ptau import Ptau
    from zkqueue.groth16.setup.wasm_overrun import sub_affine_u
    _require(NODE_MODULES / "ffjavascript" / "main.js", "ffjavascript")
    c = curves.by_name(curve)
    n8, g1b = c.n8q, c.g1_bytes
    pt = Ptau(str(ptau(curve)))
    valid = [pt.point_bytes(2, i, g1b) for i in range(8)]
    rng = random.Random(7)
    garbage = [st.pack("<IQ", 3, (1 << 12) * c.g2_bytes) + pt.point_bytes(3, 0, g1b - 12)]   # the real case
    garbage += [rng.randbytes(g1b) for _ in range(6)]
    garbage += [b"\xff" * g1b, bytes(n8) + rng.randbytes(n8)]
    pairs = [(g, v) for g in garbage for v in valid[:2]]
    script = tmp_path / "sub.mjs"
    script.write_text(WASM_SUB.format(ffjs=(NODE_MODULES / "ffjavascript" / "main.js").as_posix()))
    proc = subprocess.run(["node", str(script), curve, *[f"{a.hex()}:{b.hex()}" for a, b in pairs]],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    expected = proc.stdout.split()
    assert len(expected) == len(pairs)
    for (a, b), want in zip(pairs, expected):
        p1 = (int.from_bytes(a[:n8], "little"), int.from_bytes(a[n8:], "little"))
        p2 = (int.from_bytes(b[:n8], "little"), int.from_bytes(b[n8:], "little"))
        assert sub_affine_u(p1, p2, c.q, n8).hex() == want


def test_small_chunks_give_the_same_key(snarkjs_keys, tmp_path, monkeypatch):
    """The streaming paths at their edges: 16-entry coefficient chunks (so constraints with
    more A and B terms than that take the buffer-growing path), 100-point output chunks and
    tiny signal blocks; the key is still snarkjs's, byte for byte."""
    from zkqueue.groth16.setup import zkey_new
    monkeypatch.setattr(zkey_new, "CHUNK_CONSTRAINTS", 0)
    monkeypatch.setattr(zkey_new, "CHUNK_ROWS", 100)
    out = tmp_path / "small.zkey"
    zkey_new.new_zkey(str(FIXTURES / "bn128_poseidon_10" / "circuit.r1cs"), str(ptau("bn128")), str(out), threads=2)
    assert sha256(out) == sha256(snarkjs_keys["bn128_poseidon_10"])


R = {"bn128": 0x30644E72E131A029B85045B68181585D2833E84879B9709143E1F593F0000001,
     "bls12381": 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001}


def handmade_r1cs(path: Path, curve: str) -> None:
    """A .r1cs (1 public input, 19 private wires) whose sums make the batch-affine chains of
    kernels/cpu/setup.cpp meet their special cases: a signal with the same term twice (an
    addition of a point to itself: the doubling), one whose two terms cancel (k P + (r - k) P:
    infinity, then more additions to it), a base point used by 5 terms (a shared width-7
    table), by 16 (width 8) and by one (a term's own table), and +-1 coefficients among them."""
    import struct
    r = R[curve]
    k = r // 3 + 12345
    ks = {s: (s * 0x9E3779B97F4A7C15F39CC0605CEDC8341082276BF3A27251F86C6A11D0C18E95) % r for s in range(20)}
    constraints = [
        ([(2, k), (2, k), (3, k), (3, r - k), (4, k)], [(0, 1)], [(5, 1)]),
        ([(s, ks[s]) for s in range(2, 18)], [(1, 1)], [(6, k)]),
        ([(2, k), (18, r - 1)], [(2, r - 1)], [(7, k), (7, k)]),
        ([(8, ks[8])], [(9, k)], [(10, 1)]),
        ([(11, ks[11])], [(9, ks[3])], [(19, r - k)]),
    ]

    def lc(terms):
        return struct.pack("<I", len(terms)) + b"".join(struct.pack("<I", w) + c.to_bytes(32, "little")
                                                        for w, c in terms)
    n_wires = 20
    header = (struct.pack("<I", 32) + r.to_bytes(32, "little")
              + struct.pack("<4IQI", n_wires, 0, 1, n_wires - 2, n_wires, len(constraints)))
    body = b"".join(lc(a) + lc(b) + lc(c) for a, b, c in constraints)
    labels = b"".join(struct.pack("<Q", i) for i in range(n_wires))
    sections = b"".join(struct.pack("<IQ", t, len(d)) + d for t, d in ((1, header), (2, body), (3, labels)))
    path.write_bytes(b"r1cs" + struct.pack("<II", 1, 3) + sections)


@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
def test_sums_that_meet_doublings_and_infinity(curve, tmp_path):
    r1cs = tmp_path / "handmade.r1cs"
    handmade_r1cs(r1cs, curve)
    theirs, mine = tmp_path / "snarkjs.zkey", tmp_path / "mine.zkey"
    snarkjs("zkey", "new", r1cs, ptau(curve), theirs)
    proc = zkqueue_program("zkey", "new", r1cs, ptau(curve), mine)
    assert proc.returncode == 0, proc.stderr
    assert sha256(mine) == sha256(theirs)
