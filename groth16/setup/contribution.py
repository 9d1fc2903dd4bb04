"""`zkqueue zkey beacon` and `zkqueue zkey contribute`: one delta contribution to a Groth16
.zkey, as snarkjs 0.7.6's zkey_beacon.js / zkey_contribute.js write it.

A contribution draws a secret d (and a random G1 point s) from a ChaCha stream, multiplies
delta1 and delta2 by d and every point of sections 8 (C) and 9 (H) by 1/d, and appends its
public key (delta after, s, d*s, d*hashToG2(transcript), the transcript) to section 10.
The beacon seeds the stream from 2^N sha256 iterations of a public hash, so its output is
reproducible (and byte-identical to snarkjs's); contribute seeds it from 64 bytes of OS
randomness (and optional entropy), so its output passes `snarkjs zkey verify` but no two
runs are alike. The output's sections are in order 1..10 (snarkjs rewrites them so).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct

import numpy as np

from .. import curves, native_abi
from ..errors import FormatError, InputError, UnsupportedError
from ..formats.binfile import BinFile, read_prime
from . import ec, rng
from . import native_setup as ns
from .writer import SectionWriter

log = logging.getLogger("zkqueue.setup")

CHUNK_POINTS = 1 << 16


class Contribution:
    """One entry of section 10 (zkey_utils.js readContribution)."""

    def __init__(self, delta_after, g1_s, g1_sx, g2_spx, transcript: bytes, ctype: int,
                 name: str | None = None, num_iterations_exp: int | None = None, beacon_hash: bytes | None = None):
        self.delta_after, self.g1_s, self.g1_sx, self.g2_spx = delta_after, g1_s, g1_sx, g2_spx
        self.transcript, self.type = transcript, ctype
        self.name, self.num_iterations_exp, self.beacon_hash = name, num_iterations_exp, beacon_hash

    def hash_into(self, h, g1: ec.Group, g2: ec.Group) -> None:
        """zkey_utils.js hashPubKey."""
        for p in (self.delta_after, self.g1_s, self.g1_sx):
            h.update(g1.to_u(p))
        h.update(g2.to_u(self.g2_spx))
        h.update(self.transcript)

    def encode(self, g1: ec.Group, g2: ec.Group) -> bytes:
        """zkey_utils.js writeContribution (the name cut to 64 UTF-16 units, as JS's substring)."""
        out = (g1.to_lem(self.delta_after) + g1.to_lem(self.g1_s) + g1.to_lem(self.g1_sx)
               + g2.to_lem(self.g2_spx) + self.transcript + struct.pack("<I", self.type or 0))
        params = bytearray()
        if self.name:
            units = self.name.encode("utf-16-le", "surrogatepass")[:128]
            name = units.decode("utf-16-le", "surrogatepass").encode("utf-8", "replace")
            params += bytes([1, len(name)]) + name
        if self.type == 1:
            params += bytes([2, self.num_iterations_exp])
            params += bytes([3, len(self.beacon_hash)]) + self.beacon_hash
        return out + struct.pack("<I", len(params)) + bytes(params)


class ZkeyIn:
    """The parts of an existing Groth16 .zkey a contribution reads."""

    def __init__(self, path: str):
        self.path = path
        self.file = BinFile(path, b"zkey", ".zkey", versions=(1, 2), native=True)
        (protocol,) = struct.unpack_from("<I", self.file.section(1, "protocol"), 0)
        if protocol != 1:
            raise UnsupportedError(f"not a Groth16 key (protocol {protocol})", path=path, expected=1, found=protocol)
        hdr = self.file.section(2, "Groth16 header")
        n8q, q, pos = read_prime(hdr, 0, path, ".zkey")
        self.curve = curves.by_prime(q, path=path)
        _, r, pos = read_prime(hdr, pos, path, ".zkey")
        if r != self.curve.r:
            raise FormatError("corrupt .zkey: the scalar prime is not the curve's", path=path)
        g1b, g2b = self.curve.g1_bytes, self.curve.g2_bytes
        if len(hdr) != pos + 12 + 3 * g1b + 3 * g2b:
            raise FormatError(f"corrupt .zkey: Groth16 header is {len(hdr)} bytes", path=path,
                              expected=pos + 12 + 3 * g1b + 3 * g2b, found=len(hdr))
        self.n_vars, self.n_public, self.domain_size = struct.unpack_from("<III", hdr, pos)
        pos += 12
        self.g1, self.g2 = ec.groups(self.curve)
        pts = []
        for size, g in ((g1b, self.g1), (g1b, self.g1), (g2b, self.g2), (g2b, self.g2), (g1b, self.g1), (g2b, self.g2)):
            pts.append(g.from_lem(bytes(hdr[pos:pos + size])))
            pos += size
        self.alpha1, self.beta1, self.beta2, self.gamma2, self.delta1, self.delta2 = pts
        for sec, name in ((8, "C"), (9, "H")):
            if len(self.file.section(sec, name)) % g1b:
                raise FormatError(f"corrupt .zkey: section {sec} ({name}) is not a whole number of points", path=path)
        self.cs_hash, self.contributions = self._read_mpc()

    def _read_mpc(self) -> tuple[bytes, list[Contribution]]:
        sec = bytes(self.file.section(10, "contributions"))
        g1b, g2b = self.curve.g1_bytes, self.curve.g2_bytes
        try:
            cs_hash = sec[:64]
            (n,) = struct.unpack_from("<I", sec, 64)
            pos, out = 68, []
            for _ in range(n):
                pts = []
                for size, g in ((g1b, self.g1), (g1b, self.g1), (g1b, self.g1), (g2b, self.g2)):
                    pts.append(g.from_lem(sec[pos:pos + size]))
                    pos += size
                transcript = sec[pos:pos + 64]
                ctype, plen = struct.unpack_from("<II", sec, pos + 64)
                pos += 72
                c = Contribution(*pts, transcript, ctype)
                end, last = pos + plen, 0
                while pos < end:
                    kind = sec[pos]
                    if kind <= last:
                        raise FormatError("corrupt .zkey: contribution parameters out of order", path=self.path)
                    last = kind
                    if kind == 1:
                        c.name = sec[pos + 2:pos + 2 + sec[pos + 1]].decode("utf-8", "replace")
                        pos += 2 + sec[pos + 1]
                    elif kind == 2:
                        c.num_iterations_exp = sec[pos + 1]
                        pos += 2
                    elif kind == 3:
                        c.beacon_hash = sec[pos + 2:pos + 2 + sec[pos + 1]]
                        pos += 2 + sec[pos + 1]
                    else:
                        raise FormatError(f"corrupt .zkey: unknown contribution parameter {kind}", path=self.path)
                if pos != end or len(transcript) != 64:
                    raise FormatError("corrupt .zkey: contribution parameters do not match their length",
                                      path=self.path)
                out.append(c)
        except (struct.error, IndexError):
            raise FormatError("truncated .zkey: section 10 (contributions) ends inside a contribution",
                              path=self.path) from None
        return cs_hash, out


def _header(z: ZkeyIn, delta1, delta2) -> bytes:
    c = z.curve
    return (struct.pack("<I", c.n8q) + c.q.to_bytes(c.n8q, "little") + struct.pack("<I", c.n8r)
            + c.r.to_bytes(c.n8r, "little") + struct.pack("<III", z.n_vars, z.n_public, z.domain_size)
            + z.g1.to_lem(z.alpha1) + z.g1.to_lem(z.beta1) + z.g2.to_lem(z.beta2) + z.g2.to_lem(z.gamma2)
            + z.g1.to_lem(delta1) + z.g2.to_lem(delta2))


def _contribute(zkey_in: str, zkey_out: str, stream: rng.ChaCha, ctype: int, *, name: str | None,
                num_iterations_exp: int | None = None, beacon_hash: bytes | None = None,
                threads: int | None = None) -> bytes:
    """The contribution common to beacon and contribute; returns its contribution hash."""
    threads = threads or native_abi.default_threads()
    z = ZkeyIn(zkey_in)
    curve, g1, g2 = z.curve, z.g1, z.g2
    transcript_h = hashlib.blake2b(z.cs_hash, digest_size=64)
    for c in z.contributions:
        c.hash_into(transcript_h, g1, g2)
    d = rng.element(stream, curve.r)           # the secret (Fr.fromRng)
    g1_s = rng.point(stream, g1)
    g1_sx = g1.mul(g1_s, d)
    transcript_h.update(g1.to_u(g1_s))
    transcript_h.update(g1.to_u(g1_sx))
    transcript = transcript_h.digest()
    g2_spx = g2.mul(rng.hash_to_g2(transcript, g2), d)
    delta1, delta2 = g1.mul(z.delta1, d), g2.mul(z.delta2, d)
    mine = Contribution(delta1, g1_s, g1_sx, g2_spx, transcript, ctype, name=name,
                        num_iterations_exp=num_iterations_exp, beacon_hash=beacon_hash)
    inv = pow(d, -1, curve.r)
    mpc = z.cs_hash + struct.pack("<I", len(z.contributions) + 1) + b"".join(
        c.encode(g1, g2) for c in [*z.contributions, mine])
    out = SectionWriter(zkey_out, b"zkey", 1, 10)
    try:
        out.begin(1, 4)
        out.write(struct.pack("<I", 1))
        header = _header(z, delta1, delta2)
        out.begin(2, len(header))
        out.write(header)
        for sec, name_ in ((3, "IC"), (4, "coefficients"), (5, "A"), (6, "B1"), (7, "B2")):
            data = z.file.section(sec, name_)
            out.begin(sec, len(data))
            for i in range(0, len(data), 1 << 26):
                out.write(data[i:i + (1 << 26)])
        g1b = curve.g1_bytes
        for sec, name_ in ((8, "C"), (9, "H")):
            data = np.frombuffer(z.file.section(sec, name_), dtype=np.uint64)
            n = len(data) * 8 // g1b
            out.begin(sec, n * g1b)
            per = g1b // 8
            for i in range(0, n, CHUNK_POINTS):
                k = min(CHUNK_POINTS, n - i)
                out.write(ns.scale_g1(curve.native_id, np.ascontiguousarray(data[i * per:(i + k) * per]), k, inv,
                                      threads))
        out.begin(10, len(mpc))
        out.write(mpc)
        out.close()
    except BaseException:
        out.abort()
        raise
    h = hashlib.blake2b(digest_size=64)
    mine.hash_into(h, g1, g2)
    log.info("contribution hash: %s", h.hexdigest())
    return h.digest()


def beacon(zkey_in: str, zkey_out: str, beacon_hash_hex: str, num_iterations_exp, *, name: str | None = None,
           threads: int | None = None) -> bytes:
    """`snarkjs zkey beacon`: a contribution whose randomness is 2^num_iterations_exp sha256
    iterations of `beacon_hash_hex`; byte-identical to snarkjs's output.

    Raises:
        InputError: the beacon hash is not 1..255 bytes of hexadecimal, or the exponent is not 10..63.
        FormatError, UnsupportedError: the input is not a readable Groth16 .zkey.
    """
    if not re.fullmatch(r"(?:[0-9a-fA-F]{2}){1,255}", beacon_hash_hex or ""):
        raise InputError(f"invalid beacon hash {beacon_hash_hex!r}: it must be 1 to 255 bytes of hexadecimal "
                         "(an even number of digits, no 0x)")
    try:
        exp = int(num_iterations_exp)
    except ValueError:
        exp = -1
    if not 10 <= exp <= 63:
        raise InputError(f"invalid number of iterations exponent {num_iterations_exp!r}: it must be 10 to 63")
    bh = bytes.fromhex(beacon_hash_hex)
    return _contribute(zkey_in, zkey_out, rng.beacon_rng(bh, exp), 1, name=name, num_iterations_exp=exp,
                       beacon_hash=bh, threads=threads)


def contribute(zkey_in: str, zkey_out: str, *, name: str | None = None, entropy: str | None = None,
               threads: int | None = None) -> bytes:
    """`snarkjs zkey contribute`: a contribution seeded from 64 bytes of OS randomness
    (os.urandom) and, when given, `entropy`, through blake2b-512 (as snarkjs's getRandomRng).

    Raises:
        FormatError, UnsupportedError: the input is not a readable Groth16 .zkey.
    """
    seed = hashlib.blake2b(os.urandom(64) + (entropy or "").encode("utf-8"), digest_size=64).digest()
    return _contribute(zkey_in, zkey_out, rng.ChaCha(rng.seed_of(seed)), 0, name=name, threads=threads)
