"""`zkqueue ptau beacon` against snarkjs 0.7.6, run here.

The file must be byte-identical (sha256) to what snarkjs's `powersoftau new` + `powersoftau
beacon` (+ `powersoftau prepare phase2`) write in the test from the same curve, power,
beacon hash, iterations and name, on both curves; also to the committed power-12 fixtures
(made by the same snarkjs ceremony). The BLAKE2b state that snarkjs stores mid-stream (the
"partial hash") is checked against @noble/hashes itself on update sequences that cross
blocks as a power-22 file's do. Bad input: one line, exit code 2.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES, NODE_MODULES, _require, snarkjs, zkqueue

BEACON = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"   # make_fixture.sh's


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snarkjs_ceremony(d: Path, curve: str, power: int, beacon: str, exp: int, name: str | None) -> tuple[Path, Path]:
    """snarkjs's beacon file and its prepared file."""
    snarkjs("powersoftau", "new", curve, str(power), d / "p0.ptau")
    snarkjs("powersoftau", "beacon", d / "p0.ptau", d / "p1.ptau", beacon, str(exp),
            *([f"--name={name}"] if name else []))
    snarkjs("powersoftau", "prepare", "phase2", d / "p1.ptau", d / "final.ptau")
    return d / "p1.ptau", d / "final.ptau"


@pytest.mark.parametrize("curve,power,beacon,exp,name", [
    ("bn128", 8, BEACON, 10, "fixture-beacon"),
    ("bls12381", 7, BEACON[::-1], 11, None),
], ids=["bn128-p8", "bls12381-p7"])
def test_byte_identical_to_snarkjs(curve, power, beacon, exp, name, tmp_path):
    raw, prepared = snarkjs_ceremony(tmp_path, curve, power, beacon, exp, name)
    named = ["--name", name] if name else []
    mine = tmp_path / "mine.ptau"
    proc = zkqueue("ptau", "beacon", power, mine, "--curve", curve, "--beacon", beacon, "--iterations", exp, *named)
    assert proc.returncode == 0, proc.stderr
    assert mine.stat().st_size == prepared.stat().st_size
    assert sha256(mine) == sha256(prepared)
    proc = zkqueue("ptau", "beacon", power, mine, "--curve", curve, "--beacon", beacon, "--iterations", exp,
                   *named, "--no-prepare")
    assert proc.returncode == 0, proc.stderr
    assert sha256(mine) == sha256(raw)


@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
def test_reproduces_the_committed_power_12_fixtures(curve, tmp_path):
    mine = tmp_path / "p12.ptau"
    proc = zkqueue("ptau", "beacon", "12", mine, "--curve", curve, "--beacon", BEACON, "--iterations", "10",
                   "--name", "fixture-beacon")
    assert proc.returncode == 0, proc.stderr
    assert sha256(mine) == sha256(FIXTURES / "ptau" / f"{curve}_p12.ptau")


def test_sixteen_bit_windows_give_the_same_file(tmp_path, monkeypatch):
    """Big powers use 16-bit fixed-base windows (a 2^20-point table); force them at power 8."""
    from zkqueue.groth16.setup import ptau_beacon
    a, b = tmp_path / "w8.ptau", tmp_path / "w16.ptau"
    ptau_beacon.beacon_ptau("bn128", 8, str(a), BEACON, 10, threads=2)
    monkeypatch.setattr(ptau_beacon, "BIG_TABLE_POINTS", 1)
    ptau_beacon.beacon_ptau("bn128", 8, str(b), BEACON, 10, threads=2)
    assert sha256(a) == sha256(b)


NOBLE = """
import {{ blake2b }} from "{noble}";
import {{ toPartialHash }} from "{misc}";
const sizes = JSON.parse(process.argv[2]);
const h = blake2b.create({{ dkLen: 64 }});
let k = 0;
for (const n of sizes) {{
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = (k++ * 131 + 7) & 255;
    h.update(b);
}}
const partial = toPartialHash(h);
console.log(Buffer.from(partial).toString("hex"), Buffer.from(h.digest()).toString("hex"));
"""

# A 2^22 file's response hash: the 64-byte challenge, then G1 chunks of 2^19 compressed bytes
# and a tail (bn128), or 10922-point chunks of 48 bytes (bls12381: not a multiple of 128).
UPDATE_SIZES = [
    [64, 1 << 19, 1 << 19, 32 * 1000, 64 * 3, 64],
    [64, 10922 * 48, 10922 * 48, 48 * 77, 96 * 5461, 96],
    [128, 128, 1, 127, 256, 0, 5],
]


@pytest.mark.parametrize("sizes", UPDATE_SIZES, ids=["bn128-like", "bls12381-like", "edges"])
def test_partial_hash_matches_noble(sizes, tmp_path):
    from zkqueue.groth16.setup.ptau_beacon import Blake2b
    noble = NODE_MODULES / "@noble" / "hashes" / "esm" / "blake2b.js"
    misc = NODE_MODULES / "snarkjs" / "src" / "misc.js"
    _require(noble, "@noble/hashes")
    script = tmp_path / "noble.mjs"
    script.write_text(NOBLE.format(noble=noble.as_posix(), misc=misc.as_posix()))
    proc = subprocess.run(["node", str(script), json.dumps(sizes)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    want_partial, want_digest = proc.stdout.split()
    h, k = Blake2b(), 0
    for n in sizes:
        h.update(bytes(((k + i) * 131 + 7) & 255 for i in range(n)))
        k += n
    assert h.partial().hex() == want_partial
    everything = bytes((j * 131 + 7) & 255 for j in range(sum(sizes)))
    assert h.digest().hex() == want_digest == hashlib.blake2b(everything, digest_size=64).hexdigest()


@pytest.mark.parametrize("args,words", [
    (["0", "{out}", "--beacon", BEACON, "--iterations", "10"], ["invalid power", "1 to 27"]),
    (["28", "{out}", "--beacon", BEACON, "--iterations", "10"], ["invalid power"]),
    (["x", "{out}", "--beacon", BEACON, "--iterations", "10"], ["invalid power"]),
    (["8", "{out}", "--beacon", "0x" + BEACON, "--iterations", "10"], ["beacon hash"]),
    (["8", "{out}", "--beacon", BEACON + "0", "--iterations", "10"], ["beacon hash"]),
    (["8", "{out}", "--beacon", BEACON, "--iterations", "9"], ["10 to 63"]),
    (["8", "{out}", "--beacon", BEACON, "--iterations", "10", "--curve", "secp256k1"], ["unknown curve"]),
    (["8", "{missing}", "--beacon", BEACON, "--iterations", "10"], ["No such file or directory", "{missing}"]),
], ids=["power-0", "power-28", "power-word", "hash-0x", "hash-odd", "iterations-9", "curve", "unwritable"])
def test_bad_input_is_one_line_and_exit_2(args, words, tmp_path):
    paths = {"out": str(tmp_path / "out.ptau"), "missing": str(tmp_path / "no" / "dir" / "out.ptau")}
    proc = zkqueue("ptau", "beacon", *[a.format(**paths) for a in args])
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for w in words:
        assert w.format(**paths) in lines[0], lines[0]
    assert not (tmp_path / "out.ptau").exists()
