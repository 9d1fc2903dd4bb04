"""`zkqueue ptau beacon`: a powers of tau whose only contribution is a public beacon, byte-
identical to snarkjs 0.7.6's `powersoftau new` + `powersoftau beacon` (+ `powersoftau
prepare phase2`) with the same curve, power, beacon hash, iterations and name.

TEST MATERIAL ONLY: the beacon's secrets (tau, alpha, beta) follow from the public beacon
hash, so anyone can forge proofs for a key made from this file. It exists so that keys of
2^20..2^24 constraints can be made in minutes on the machine that proves with them
(snarkjs's own beacon takes ~20 minutes at power 18 on the 2-core CI VM).

Because the secrets are known, every point is [s]G for a scalar computed in the field:
tau^i (times alpha or beta) for sections 2-6, and the Lagrange values L_i(tau) over each
power's domain (times alpha or beta) for the prepared sections 12-15, as
../shared/tools/fast_prepare.mjs computes them. The native kernels (kernels/cpu/ptau.cpp)
do the fixed-base multiplications, the encodings and the BLAKE2b whose mid-stream state
snarkjs stores in the contribution record (the "partial hash").
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import re
import struct

import numpy as np

from .. import curves, native_abi
from ..curves import Curve
from ..errors import InputError
from . import ec, rng
from .writer import SectionWriter

log = logging.getLogger("zkqueue.setup")

RESPONSE_CHUNK_BYTES = 1 << 20   # powersoftau_beacon.js processSection: floor(2^20 / LEM size) points per hash update
BIG_TABLE_POINTS = 1 << 18       # at least this many points of a group: 16-bit windows (a 2^20-point table)


class Blake2b:
    """BLAKE2b-512 in the native kernel, with @noble/hashes' buffering, so that `partial()`
    gives the 216 bytes snarkjs's misc.toPartialHash writes."""

    STATE_BYTES = 208   # kernels/cpu/ptau.cpp struct Blake2b: h[8], length, pos, buf[128]

    def __init__(self):
        self._lib = native_abi.library()
        self.state = np.zeros(self.STATE_BYTES, dtype=np.uint8)
        self._lib.zkq_blake2b_init(self.state.ctypes.data)

    def update(self, data) -> None:
        """Feeds bytes (bytes or a contiguous numpy array) as ONE noble update call."""
        if isinstance(data, np.ndarray):
            self._lib.zkq_blake2b_update(self.state.ctypes.data, data.ctypes.data, data.nbytes)
        else:
            buf = ctypes.create_string_buffer(bytes(data), len(data))
            self._lib.zkq_blake2b_update(self.state.ctypes.data, ctypes.addressof(buf), len(data))

    def digest(self) -> bytes:
        out = ctypes.create_string_buffer(64)
        self._lib.zkq_blake2b_final(self.state.ctypes.data, ctypes.addressof(out))
        return out.raw

    def partial(self) -> bytes:
        """misc.toPartialHash: the block buffer, the chained state h as 32-bit halves, then
        u32 words [length - pos (mod 2^32), 0, pos, 0, 0, 0]."""
        s = self.state.tobytes()
        length, pos = struct.unpack_from("<QQ", s, 64)
        return s[80:208] + s[0:64] + struct.pack("<6I", (length - pos) & 0xFFFFFFFF, 0, pos, 0, 0, 0)


class _Group:
    """One group's fixed-base table and the kernels over it."""

    def __init__(self, curve: Curve, group: int, g: ec.Group, gen, n_points: int, threads: int):
        self.curve, self.group, self.g, self.threads = curve, group, g, threads
        self.point_bytes = curve.g1_bytes if group == 1 else curve.g2_bytes
        self.words = self.point_bytes // 8
        self.w = 16 if n_points >= BIG_TABLE_POINTS else 8
        nwin = (256 + self.w - 1) // self.w
        self.table = np.empty(nwin * ((1 << self.w) - 1) * self.words, dtype=np.uint64)
        base = np.frombuffer(g.to_lem(gen), dtype=np.uint64).copy()
        rc = native_abi.library().zkq_ptau_table(curve.native_id, group, base.ctypes.data, self.w,
                                                 self.table.ctypes.data, threads)
        native_abi.raise_for(rc, "building the fixed-base table")

    def points(self, kind: int, params: tuple[int, ...], start: int, n: int) -> np.ndarray:
        """n affine LEM points [s_i]G, i in [start, start + n) (kind 0: s_i = a b^i; kind 1:
        s_i = c w^i / (tau - w^i) - t w^i with params (w, tau, c, t))."""
        p = np.frombuffer(b"".join(v.to_bytes(32, "little") for v in (*params, 0, 0, 0)[:4]), dtype=np.uint64).copy()
        out = np.empty(n * self.words, dtype=np.uint64)
        rc = native_abi.library().zkq_ptau_points(self.curve.native_id, self.group, kind, self.table.ctypes.data,
                                                  self.w, p.ctypes.data, start, n, out.ctypes.data, self.threads)
        native_abi.raise_for(rc, "computing powers-of-tau points")
        return out

    def to_c(self, pts: np.ndarray) -> np.ndarray:
        n = pts.nbytes // self.point_bytes
        out = np.empty(n * self.point_bytes // 2, dtype=np.uint8)
        rc = native_abi.library().zkq_ptau_lem_to_c(self.curve.native_id, self.group, pts.ctypes.data, n,
                                                    out.ctypes.data, self.threads)
        native_abi.raise_for(rc, "encoding points for the response hash")
        return out

    def to_u(self, pts) -> np.ndarray:
        arr = np.frombuffer(pts, dtype=np.uint8)
        n = arr.nbytes // self.point_bytes
        out = np.empty(n * self.point_bytes, dtype=np.uint8)
        rc = native_abi.library().zkq_setup_lem_to_u(self.curve.native_id, self.group, arr.ctypes.data, n,
                                                     out.ctypes.data, self.threads)
        native_abi.raise_for(rc, "encoding points for the challenge hash")
        return out


def parse_args(curve_name: str, power, beacon_hash_hex: str, num_iterations_exp) -> tuple[Curve, int, bytes, int]:
    """Checks the command's arguments as snarkjs would (and the power the prepared file needs).

    Raises:
        InputError: an unknown curve, a power outside 1..two-adicity - 1, a beacon hash that is
            not 1..255 bytes of hexadecimal, or an iterations exponent outside 10..63.
    """
    names = {"bn128": curves.BN128, "bn254": curves.BN128, "bls12381": curves.BLS12381,
             "bls12-381": curves.BLS12381}
    curve = names.get(str(curve_name).lower())
    if curve is None:
        raise InputError(f"unknown curve {curve_name!r}: use bn128 or bls12381")
    try:
        p = int(power)
    except (TypeError, ValueError):
        p = 0
    if not 1 <= p < curve.two_adicity:
        raise InputError(f"invalid power {power!r}: it must be 1 to {curve.two_adicity - 1} on {curve.name} "
                         "(prepare phase2 needs the 2^(power+1) domain)")
    if not re.fullmatch(r"(?:[0-9a-fA-F]{2}){1,255}", beacon_hash_hex or ""):
        raise InputError(f"invalid beacon hash {beacon_hash_hex!r}: it must be 1 to 255 bytes of hexadecimal "
                         "(an even number of digits, no 0x)")
    try:
        exp = int(num_iterations_exp)
    except (TypeError, ValueError):
        exp = -1
    if not 10 <= exp <= 63:
        raise InputError(f"invalid number of iterations exponent {num_iterations_exp!r}: it must be 10 to 63")
    return curve, p, bytes.fromhex(beacon_hash_hex), exp


def first_challenge_hash(curve: Curve, power: int) -> bytes:
    """powersoftau_utils.js calculateFirstChallengeHash: the hash of the blank accumulator
    (every point the generator), after the hash of nothing."""
    g1, g2 = ec.groups(curve)
    u1, u2 = g1.to_u(curve.g1), g2.to_u(curve.g2)
    h = hashlib.blake2b(hashlib.blake2b(b"", digest_size=64).digest(), digest_size=64)

    def repeat(unit: bytes, n: int) -> None:
        block = unit * min(n, 1 << 15)
        full, rest = divmod(n, 1 << 15)
        for _ in range(full):
            h.update(block)
        h.update(unit * rest)

    repeat(u1, (2 << power) - 1)
    repeat(u2, 1 << power)
    repeat(u1, 1 << power)
    repeat(u1, 1 << power)
    h.update(u2)
    return h.digest()


class BeaconKey:
    """powersoftau keypair.js createPTauKey from the beacon's ChaCha stream: the secrets and
    their public keys (g1_s, g1_sx, g2_spx per secret)."""

    def __init__(self, curve: Curve, challenge: bytes, beacon_hash: bytes, exp: int):
        g1, g2 = ec.groups(curve)
        stream = rng.beacon_rng(beacon_hash, exp)
        self.tau, self.alpha, self.beta = (rng.element(stream, curve.r) for _ in range(3))
        self.pub = []
        for perso, prv in enumerate((self.tau, self.alpha, self.beta)):
            g1_s = rng.point(stream, g1)
            g1_sx = g1.mul(g1_s, prv)
            digest = hashlib.blake2b(bytes([perso]) + challenge + g1.to_u(g1_s) + g1.to_u(g1_sx),
                                     digest_size=64).digest()
            g2_spx = g2.mul(rng.hash_to_g2(digest, g2), prv)
            self.pub.append((g1_s, g1_sx, g2_spx))

    def encode(self, g1: ec.Group, g2: ec.Group, lem: bool) -> bytes:
        """toPtauPubKeyRpr: the six G1 points, then the three G2 points (LEM or uncompressed)."""
        e1, e2 = (g1.to_lem, g2.to_lem) if lem else (g1.to_u, g2.to_u)
        return (b"".join(e1(p) for s, sx, _ in self.pub for p in (s, sx))
                + b"".join(e2(spx) for _, _, spx in self.pub))


def _name_param(name: str) -> bytes:
    """The name as writeContribution stores it: cut to 64 UTF-16 units (JS substring), UTF-8."""
    units = name.encode("utf-16-le", "surrogatepass")[:128]
    data = units.decode("utf-16-le", "surrogatepass").encode("utf-8", "replace")
    return bytes([1, len(data)]) + data


def beacon_ptau(curve_name: str, power, out_path: str, beacon_hash_hex: str, num_iterations_exp, *,
                name: str | None = None, prepare: bool = True, threads: int | None = None) -> bytes:
    """Writes the powers of tau of `power` on `curve_name` whose one contribution is the
    beacon (prepared for phase 2 unless prepare=False); returns the contribution's response
    hash (what snarkjs prints as "Contribution Response Hash imported").

    Raises:
        InputError: a bad argument (see parse_args).
    """
    curve, power, bh, exp = parse_args(curve_name, power, beacon_hash_hex, num_iterations_exp)
    threads = threads or native_abi.default_threads()
    out = SectionWriter(out_path, b"ptau", 1, 11 if prepare else 7)   # an unwritable path fails before the work
    try:
        g1, g2 = ec.groups(curve)
        challenge = first_challenge_hash(curve, power)
        key = BeaconKey(curve, challenge, bh, exp)
        r, n = curve.r, 1 << power
        if pow(key.tau, 2 * n, r) == 1:   # then some tau - w^i is zero: no Lagrange basis (never for a real beacon)
            raise InputError("this beacon's tau is a root of unity of the domain: choose another beacon hash")
        G1 = _Group(curve, 1, g1, curve.g1, 2 * n, threads)
        G2 = _Group(curve, 2, g2, curve.g2, n, threads)
        header = (struct.pack("<I", curve.n8q) + curve.q.to_bytes(curve.n8q, "little")
                  + struct.pack("<II", power, power))
        out.begin(1, len(header))
        out.write(header)
        resp = Blake2b()
        resp.update(challenge)
        # (section, group, points, first scalar, contribution-record point index)
        plan = [(2, G1, 2 * n - 1, 1, 1), (3, G2, n, 1, 1), (4, G1, n, key.alpha, 0), (5, G1, n, key.beta, 0),
                (6, G2, 1, key.beta, 0)]
        record = []
        for sec, G, count, first, keep in plan:
            out.begin(sec, count * G.point_bytes)
            chunk = RESPONSE_CHUNK_BYTES // G.point_bytes
            for i in range(0, count, chunk):
                k = min(chunk, count - i)
                pts = G.points(0, (first, key.tau), i, k)
                out.write(pts)
                resp.update(G.to_c(pts))
                if i == 0:
                    record.append(pts.tobytes()[keep * G.point_bytes:(keep + 1) * G.point_bytes])
            log.info("ptau section %d: %d points", sec, count)
        partial = resp.partial()
        resp.update(key.encode(g1, g2, lem=False))
        response = resp.digest()
        out.f.flush()
        next_challenge = _next_challenge(out_path, response, G1, G2, n, power, curve)
        contribution = (b"".join(record) + key.encode(g1, g2, lem=True) + partial + next_challenge
                        + struct.pack("<I", 1))
        params = (_name_param(name) if name else b"") + bytes([2, exp, 3, len(bh)]) + bh
        contribution += struct.pack("<I", len(params)) + params
        sec7 = struct.pack("<I", 1) + contribution
        out.begin(7, len(sec7))
        out.write(sec7)
        if prepare:
            _prepare(out, key, G1, G2, power, curve)
        out.close()
    except BaseException:
        out.abort()
        raise
    log.info("contribution response hash: %s", response.hex())
    return response


def _next_challenge(path: str, response: bytes, G1: _Group, G2: _Group, n: int, power: int, curve: Curve) -> bytes:
    """blake2b(response hash || the uncompressed points of sections 2-6), read back from the file."""
    h = hashlib.blake2b(response, digest_size=64)
    # Plain reads, not a mapping: the 2^22 file's 2.3 GB of sections would count in the RSS.
    with open(path, "rb") as f:
        f.seek(12 + 12 + 4 + curve.n8q + 8)          # file header, then section 1
        for G, count in ((G1, 2 * n - 1), (G2, n), (G1, n), (G1, n), (G2, 1)):
            f.seek(12, 1)
            for i in range(0, count, 1 << 16):
                k = min(1 << 16, count - i)
                buf = np.empty(k * G.point_bytes, dtype=np.uint8)
                if f.readinto(memoryview(buf)) != buf.nbytes:
                    raise OSError(f"{path}: short read while hashing the new challenge")
                h.update(G.to_u(buf))
    return h.digest()


def _prepare(out: SectionWriter, key: BeaconKey, G1: _Group, G2: _Group, power: int, curve: Curve) -> None:
    """prepare phase2's sections 12-15: per power p the Lagrange basis of the size-2^p domain
    at tau (times alpha, beta), as [L_i(tau)]G. At p = power + 1 (section 12 only) snarkjs's
    iFFT input lacks tau^(n-1) (it is zero), which gives L_i(tau) - w^i tau^(n-1) / n."""
    r, tau = curve.r, key.tau
    for sec, G, factor, top in ((12, G1, 1, power + 1), (13, G2, 1, power), (14, G1, key.alpha, power),
                                (15, G1, key.beta, power)):
        out.begin(sec, ((2 << top) - 1) * G.point_bytes)
        for p in range(top + 1):
            m = 1 << p
            ninv = pow(m, -1, r)
            c = (pow(tau, m, r) - 1) * ninv % r * factor % r
            t = pow(tau, m - 1, r) * ninv % r * factor % r if (sec == 12 and p == power + 1) else 0
            w = curve.root_of_unity(p)
            step = 1 << 18
            for i in range(0, m, step):
                out.write(G.points(1, (w, tau, c, t), i, min(step, m - i)))
        log.info("ptau section %d: Lagrange bases of powers 0..%d", sec, top)
