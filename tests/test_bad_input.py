"""Bad input to `zkqueue prove`: a specific one-line error naming the file, exit 2, no proof.

Covers what breaks in practice: truncated downloads, flipped bits, the wrong file in the
wrong place, the other curve's files, a PLONK key, a witness for another circuit, and a
witness that does not satisfy the constraints.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from conftest import FIXTURES, fixture_dir, snarkjs, zkqueue

BN = fixture_dir("bn128_chain_10")
BLS = fixture_dir("bls12381_chain_10")


def copy(src: Path, dst: Path, mutate=None) -> Path:
    data = bytearray(src.read_bytes())
    if mutate:
        data = mutate(data)
    dst.write_bytes(bytes(data))
    return dst


def section_offset(data: bytes, stype: int) -> int:
    pos = 12
    for _ in range(struct.unpack_from("<I", data, 8)[0]):
        t, size = struct.unpack_from("<IQ", data, pos)
        if t == stype:
            return pos + 12
        pos += 12 + size
    raise KeyError(stype)


def flip(stype: int, offset: int, mask: int = 0x01):
    def mutate(data: bytearray) -> bytearray:
        data[section_offset(data, stype) + offset] ^= mask
        return data
    return mutate


def prove_fails(tmp_path, zkey, wtns, *extra) -> str:
    """Runs prove, asserts the failure contract, returns the one error line."""
    out = tmp_path / "proof.json"
    proc = zkqueue("prove", zkey, wtns, out, tmp_path / "public.json", *extra, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("zkqueue: error: ")
    assert not out.exists()
    return lines[0]


def test_truncated_zkey(tmp_path):
    z = copy(BN / "circuit_final.zkey", tmp_path / "cut.zkey", lambda d: d[: len(d) // 2])
    err = prove_fails(tmp_path, z, BN / "witness.wtns")
    assert "cut.zkey" in err and "truncated .zkey" in err


def test_zkey_cut_inside_header(tmp_path):
    z = copy(BN / "circuit_final.zkey", tmp_path / "tiny.zkey", lambda d: d[:7])
    err = prove_fails(tmp_path, z, BN / "witness.wtns")
    assert "tiny.zkey" in err and "truncated .zkey" in err


@pytest.mark.parametrize("section,name", [(5, "section 5 (A)"), (9, "section 9 (H)"), (7, "section 7 (B2)")])
def test_bit_flipped_zkey_points(tmp_path, section, name):
    z = copy(BLS / "circuit_final.zkey", tmp_path / "flipped.zkey", flip(section, 96 * 10 + 7))
    err = prove_fails(tmp_path, z, BLS / "witness.wtns")
    assert "flipped.zkey" in err and name in err


def test_bit_flipped_zkey_header(tmp_path):
    # nVars lives right after the two primes in section 2.
    z = copy(BN / "circuit_final.zkey", tmp_path / "hdr.zkey", flip(2, 4 + 32 + 4 + 32, 0x10))
    err = prove_fails(tmp_path, z, BN / "witness.wtns")
    assert "hdr.zkey" in err and "corrupt .zkey" in err


def test_wrong_magic(tmp_path):
    err = prove_fails(tmp_path, BN / "witness.wtns", BN / "witness.wtns")
    assert "witness.wtns" in err and "not a .zkey" in err and "b'wtns'" in err
    err = prove_fails(tmp_path, BN / "circuit_final.zkey", BN / "circuit_final.zkey")
    assert "not a .wtns" in err


def test_other_prime_is_refused(tmp_path):
    def other_prime(data: bytearray) -> bytearray:
        data[section_offset(data, 2) + 4] ^= 0x02   # low byte of q
        return data
    z = copy(BN / "circuit_final.zkey", tmp_path / "prime.zkey", other_prime)
    err = prove_fails(tmp_path, z, BN / "witness.wtns")
    assert "prime.zkey" in err and "unsupported curve" in err


def test_witness_of_the_other_curve(tmp_path):
    err = prove_fails(tmp_path, BN / "circuit_final.zkey", BLS / "witness.wtns")
    assert "witness is for bls12381" in err and "bn128" in err


def test_witness_length_mismatch(tmp_path):
    err = prove_fails(tmp_path, BN / "circuit_final.zkey", fixture_dir("bn128_chain_12") / "witness.wtns")
    assert "witness has 4095 values" in err and "expects 1023" in err


def test_truncated_witness(tmp_path):
    w = copy(BN / "witness.wtns", tmp_path / "short.wtns", lambda d: d[:-40])
    err = prove_fails(tmp_path, BN / "circuit_final.zkey", w)
    assert "short.wtns" in err and "truncated .wtns" in err


def test_witness_value_out_of_field(tmp_path):
    w = copy(BN / "witness.wtns", tmp_path / "big.wtns", flip(2, 32 * 20 + 31, 0x80))
    err = prove_fails(tmp_path, BN / "circuit_final.zkey", w)
    assert "big.wtns" in err and "value 20 is not below" in err


def test_unsatisfying_witness(tmp_path):
    # Wire 100 is an internal signal of the multiplication chain; +1 breaks its constraint.
    w = copy(BLS / "witness.wtns", tmp_path / "bad.wtns", flip(2, 32 * 100, 0x01))
    err = prove_fails(tmp_path, BLS / "circuit_final.zkey", w)
    assert "bad.wtns" in err and "does not satisfy" in err
    err = prove_fails(tmp_path, BLS / "circuit_final.zkey", w, "--r1cs", BLS / "circuit.r1cs")
    assert "does not satisfy constraint" in err


def test_plonk_zkey_is_refused(tmp_path):
    ptau = FIXTURES / "ptau" / "bn128_p12.ptau"
    shutil.copy(BN / "circuit.r1cs", tmp_path / "c.r1cs")
    snarkjs("plonk", "setup", tmp_path / "c.r1cs", ptau, tmp_path / "plonk.zkey")
    err = prove_fails(tmp_path, tmp_path / "plonk.zkey", BN / "witness.wtns")
    assert "plonk.zkey" in err and "plonk" in err and "Groth16 only" in err
