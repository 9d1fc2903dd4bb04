"""`zkqueue zkey new circuit.r1cs pot.ptau circuit_0000.zkey`: the Groth16 phase-2 setup,
byte for byte what snarkjs 0.7.6's `zkey new` (src/zkey_new.js) writes.

What the file holds (sections in snarkjs's order 1, 2, 4, 3, 9, 8, 5, 6, 7, 10):
  1  protocol 1 (Groth16)
  2  header: q, r, nVars, nPublic, domainSize, alpha1, beta1, beta2 (copied from the
     .ptau), gamma2 = delta2 = the G2 generator, delta1 = the G1 generator
  4  coefficients: per constraint its A then B terms (matrix, constraint, signal,
     coef * R^2 mod r), then nPublic + 1 rows binding the public signals
  3  IC / 8 C: per signal, sum of coef_A * betaTau_L[c] + coef_B * alphaTau_L[c] + coef_C *
     tau_L[c] over its terms (IC: signals 0..nPublic, C: the rest)
  9  H: the odd points of the size-2n Lagrange basis of tauG1
  5  A, 6 B1, 7 B2: per signal, sum of coef * tau_L[c] over its A (B) terms (B2 in G2)
  10 the circuit hash (blake2b-512 of every point above in the uncompressed encoding, in
     snarkjs's order, with the tau-power differences standing in for H) and 0 contributions.

Memory: the .r1cs and .ptau are memory-mapped; the constraints are read twice in order
(counts, then a signal-major index of (constraint u32, coefficient offset u64) per term); the
points of every section are computed and written CHUNK_ROWS at a time.
"""

from __future__ import annotations

import hashlib
import logging
import struct
import time

import numpy as np

from .. import native_abi
from ..errors import FormatError, MismatchError, UnsupportedError
from ..formats.binfile import BinFile, read_prime
from . import native_setup as ns
from .ptau import Ptau
from .writer import SectionWriter, u32be

log = logging.getLogger("zkqueue.setup")

CHUNK_ROWS = 1 << 16          # points computed and written per native call
CHUNK_CONSTRAINTS = 1 << 18   # constraints per pass-2 call (its section-4 entries are written at once)
HASH_CHUNK = 1 << 14          # snarkjs's hashHPoints chunk (its last chunk's length is kept: see _hash_tau)


class R1csHeader:
    """The .r1cs header fields `zkey new` uses, and its constraint section's place."""

    def __init__(self, path: str):
        self.path = path
        self.file = BinFile(path, b"r1cs", ".r1cs", versions=(1,), native=True)
        hdr = self.file.section(1, "header")
        self.n8, self.prime, pos = read_prime(hdr, 0, path, ".r1cs")
        if len(hdr) < pos + 28:
            raise FormatError(f"corrupt .r1cs: header is {len(hdr)} bytes", path=path, expected=pos + 28)
        self.n_wires, self.n_out, self.n_pub_in, self.n_prv_in = struct.unpack_from("<4I", hdr, pos)
        (self.n_labels,) = struct.unpack_from("<Q", hdr, pos + 16)
        (self.n_constraints,) = struct.unpack_from("<I", hdr, pos + 24)
        self.n_public = self.n_out + self.n_pub_in
        if self.n_public + 1 > self.n_wires:
            raise FormatError(f"corrupt .r1cs: {self.n_public} public signals but {self.n_wires} wires", path=path)
        self.sec_off, self.sec_len = self.file.sections.get(2, (None, 0))
        if self.sec_off is None:
            raise FormatError("corrupt .r1cs: section 2 (constraints) is missing", path=path)


def _lem_g1(curve, x: int, y: int) -> bytes:
    R = 1 << (8 * curve.n8q)
    return b"".join((v * R % curve.q).to_bytes(curve.n8q, "little") for v in (x, y))


def _lem_g2(curve, x, y) -> bytes:
    R = 1 << (8 * curve.n8q)
    return b"".join((v * R % curve.q).to_bytes(curve.n8q, "little") for v in (*x, *y))


def new_zkey(r1cs_path: str, ptau_path: str, zkey_path: str, *, threads: int | None = None) -> bytes:
    """Writes the initial .zkey of circuit `r1cs_path` with the prepared `ptau_path`; returns
    the circuit hash (64 bytes).

    Raises:
        FormatError: either input is truncated or corrupt.
        UnsupportedError: an unknown curve, or a .ptau that is not prepared.
        MismatchError: the .r1cs and .ptau are of different curves, or the .ptau is too small.
    """
    from .. import curves  # noqa: PLC0415

    threads = threads or native_abi.default_threads()
    t0 = time.perf_counter()
    r1 = R1csHeader(r1cs_path)
    curve = curves.by_scalar_prime(r1.prime, path=r1cs_path)
    pt = Ptau(ptau_path)
    if pt.curve is not curve:
        raise MismatchError(f"curve mismatch: {r1cs_path} is a {curve.name} circuit but {ptau_path} is a "
                            f"{pt.curve.name} powers of tau", expected=curve.name, found=pt.curve.name)
    if r1.n8 != curve.n8r:
        raise FormatError(f"corrupt .r1cs: {r1.n8}-byte coefficients, expected {curve.n8r}", path=r1cs_path)
    need = max((r1.n_constraints + r1.n_public).bit_length(), 1)   # snarkjs: log2(nC + nPub) + 1
    if need > pt.power:
        raise MismatchError(f"powers of tau too small: the circuit needs power {need} "
                            f"({r1.n_constraints} constraints + {r1.n_public} public signals) but it has "
                            f"power {pt.power}", path=ptau_path, expected=need, found=pt.power)
    if need > curve.two_adicity:
        raise UnsupportedError(f"circuit too big for {curve.name}", path=r1cs_path)
    n = 1 << need
    g1b, g2b = curve.g1_bytes, curve.g2_bytes
    cid = curve.native_id
    n_vars, n_pub = r1.n_wires, r1.n_public
    sec_addr = r1.file.address(r1.sec_off)

    # -- the constraints, pass 1: term counts per signal ---------------------------------------
    counts = ns.r1cs_count(cid, sec_addr, r1.sec_len, r1.n8, r1.n_constraints, n_vars, r1cs_path)
    r1.file.release(r1.sec_off, r1.sec_len)
    counts[0, :n_pub + 1] += 1   # the public-input binding rows (one A term each, coefficient 1)
    # One term array for the three matrices, end to end; rowstart[m][s] indexes into it.
    nnz = [int(counts[m].sum()) for m in range(3)]
    rowstart = []
    first = 0
    for m in range(3):
        rs = np.empty(n_vars + 1, dtype=np.int64)
        rs[0] = first
        np.cumsum(counts[m], out=rs[1:])
        rs[1:] += first
        rowstart.append(rs)
        first += nnz[m]
    del counts
    term_c = np.empty(first, dtype=np.uint32)
    term_k = np.empty(first, dtype=np.uint64)
    n_coefs = nnz[0] + nnz[1]   # A and B terms, the binding rows included
    log.info("r1cs: %d constraints, %d wires, %d public; terms A %d B %d C %d; domain 2^%d (%.2f s)",
             r1.n_constraints, n_vars, n_pub, nnz[0], nnz[1], nnz[2], need, time.perf_counter() - t0)

    out = SectionWriter(zkey_path, b"zkey", 1, 10)
    try:
        csh = hashlib.blake2b(digest_size=64)
        # -- 1, 2: protocol and header -------------------------------------------------------------
        out.begin(1, 4)
        out.write(struct.pack("<I", 1))
        alpha1 = pt.point_bytes(4, 0, g1b)
        beta1 = pt.point_bytes(5, 0, g1b)
        beta2 = pt.point_bytes(6, 0, g2b)
        g1 = _lem_g1(curve, *curve.g1)
        g2 = _lem_g2(curve, *curve.g2)
        header = (struct.pack("<I", curve.n8q) + curve.q.to_bytes(curve.n8q, "little")
                  + struct.pack("<I", curve.n8r) + curve.r.to_bytes(curve.n8r, "little")
                  + struct.pack("<III", n_vars, n_pub, n)
                  + alpha1 + beta1 + beta2 + g2 + g1 + g2)
        out.begin(2, len(header))
        out.write(header)
        for data, group in ((alpha1, 1), (beta1, 1), (beta2, 2), (g2, 2), (g1, 1), (g2, 2)):
            csh.update(ns.lem_to_u(cid, group, np.frombuffer(data, dtype=np.uint64).copy(), 1, 1))

        # -- 4: coefficients, written as pass 2 fills the term index ---------------------------------
        entry = 12 + curve.n8r
        out.begin(4, 4 + entry * n_coefs)
        out.write(struct.pack("<I", n_coefs))
        cursor = np.concatenate([rs[:-1] for rs in rowstart])
        pos, c = 0, 0
        buf = np.empty(entry * min(n_coefs, 3 * CHUNK_CONSTRAINTS + 16), dtype=np.uint8)
        while c < r1.n_constraints:
            pos, done, k = ns.r1cs_fill(cid, sec_addr, r1.sec_len, r1.n8, c, r1.n_constraints, n_vars, pos,
                                        cursor, term_c, term_k, buf, entry)
            if done == c:   # one constraint with more terms than the buffer holds
                buf = np.empty(entry * k, dtype=np.uint8)
                continue
            out.write(buf[:k * entry])
            r1.file.release(r1.sec_off, pos)   # constraints read: out of the resident set
            c = done
        one_r2 = (1 << 512) % curve.r   # 1 * R^2 mod r
        tail = bytearray()
        for s in range(n_pub + 1):
            tail += struct.pack("<III", 0, r1.n_constraints + s, s) + one_r2.to_bytes(curve.n8r, "little")
            at = cursor[s]
            term_c[at] = r1.n_constraints + s
            term_k[at] = ns.ONE_COEF
            cursor[s] += 1
        out.write(bytes(tail))
        del cursor, buf
        log.info("coefficients: %d entries (%.2f s)", n_coefs, time.perf_counter() - t0)

        base = (1 << need) - 1   # point index of the size-n Lagrange basis in sections 12..15
        tau_l = pt.address(12, base)
        tau2_l = pt.address(13, base)
        alpha_l = pt.address(14, base)
        beta_l = pt.address(15, base)
        mats = [(rowstart[m], term_c, term_k) for m in range(3)]
        l_parts = [(*mats[0], beta_l), (*mats[1], alpha_l), (*mats[2], tau_l)]

        def release(section: int, start: int, size: int) -> None:
            pt.file.release(pt.file.sections[section][0] + start, size)

        def points(stype: int, group: int, parts, first: int, count: int) -> None:
            """Section `stype`: signals [first, first + count) of the combination, with their hash."""
            pb = g1b if group == 1 else g2b
            out.begin(stype, count * pb)
            csh.update(u32be(count))
            for s in range(0, count, CHUNK_ROWS):
                k = min(CHUNK_ROWS, count - s)
                chunk = np.empty(k * pb // 8, dtype=np.uint64)
                ns.combine(cid, group, parts, sec_addr, r1.n8, first + s, k, chunk, threads)
                out.write(chunk)
                csh.update(ns.lem_to_u(cid, group, chunk, k, threads))
                # drop what this chunk read (bases, coefficients): the next chunk faults back
                # in, from the page cache, only the pages it needs
                for part in parts:
                    pt.file.release(part[3] - pt.file.address(0), n * pb)
                r1.file.release(r1.sec_off, r1.sec_len)
            log.info("section %d: %d points (%.2f s, cpu %.2f s)", stype, count, time.perf_counter() - t0, time.process_time())

        points(3, 1, l_parts, 0, n_pub + 1)
        _write_h(out, pt, curve, need, n)
        _hash_tau(csh, pt, curve, n, threads)
        # Mapped pages count in this process's RSS until dropped: each part of the .ptau (and
        # the .r1cs coefficients) leaves the resident set once the sections that read it are
        # written (the page cache keeps them for a re-read).
        release(12, ((2 << need) - 1) * g1b, 2 * n * g1b)
        release(2, 0, pt.file.sections[2][1])
        log.info("section 9 and the tau hash (%.2f s)", time.perf_counter() - t0)
        points(8, 1, l_parts, n_pub + 1, n_vars - n_pub - 1)
        release(14, base * g1b, n * g1b)
        release(15, base * g1b, n * g1b)
        points(5, 1, [(*mats[0], tau_l)], 0, n_vars)
        points(6, 1, [(*mats[1], tau_l)], 0, n_vars)
        release(12, base * g1b, n * g1b)
        points(7, 2, [(*mats[1], tau2_l)], 0, n_vars)
        digest = csh.digest()
        out.begin(10, 64 + 4)
        out.write(digest + struct.pack("<I", 0))
        out.close()
    except BaseException:
        out.abort()
        raise
    log.info("zkey new: %s in %.2f s", zkey_path, time.perf_counter() - t0)
    return digest


def _write_h(out: SectionWriter, pt: Ptau, curve, need: int, n: int) -> None:
    """Section 9: the odd points of the size-2n Lagrange basis of tauG1 (snarkjs writeHs)."""
    g1b = curve.g1_bytes
    sec = np.frombuffer(pt.file.section(12, "Lagrange tauG1"), dtype=np.uint8)
    out.begin(9, n * g1b)
    if need < curve.two_adicity:
        basis = sec[((2 << need) - 1) * g1b: ((4 << need) - 1) * g1b].reshape(2 * n, g1b)
        start = pt.file.sections[12][0] + ((2 << need) - 1) * g1b
        for s in range(0, n, CHUNK_ROWS):
            out.write(np.ascontiguousarray(basis[2 * s + 1: 2 * min(n, s + CHUNK_ROWS): 2]))
            pt.file.release(start + 2 * s * g1b, 2 * CHUNK_ROWS * g1b)   # read: out of the RSS
    else:   # the domain is the field's largest: snarkjs copies these points instead
        start = ((2 << need) - 1 + n) * g1b
        out.write(sec[start: start + n * g1b])


def _hash_tau(csh, pt: Ptau, curve, n: int, threads: int) -> None:
    """The circuit hash's H part: tauG1[n + i] - tauG1[i] for i < n - 1, as snarkjs's
    hashHPoints reads them: in chunks of HASH_CHUNK points where every chunk, the last
    included, is min(n - 1, HASH_CHUNK) points long. Reads past n - 1 run on into the tau
    powers beyond (a .ptau bigger than the circuit) or, with a .ptau of exactly the
    circuit's power, past the section's end: wasm_overrun repeats snarkjs's arithmetic on
    those bytes."""
    from .wasm_overrun import sub_affine_u  # noqa: PLC0415

    g1b, n8 = curve.g1_bytes, curve.n8q
    off, size = pt.file.sections[2]
    data = pt.file.data
    csh.update(u32be(n - 1))
    per = min(n - 1, HASH_CHUNK)
    for i in range(0, n - 1, HASH_CHUNK):
        inside = max(0, min(per, (size // g1b) - n - i))   # points whose tauG1[n + i + j] is in the section
        if inside:
            csh.update(ns.sub_u_g1(curve.native_id, pt.file.address(off + (i + n) * g1b),
                                   pt.file.address(off + i * g1b), inside, g1b, threads))
            pt.file.release(off + (i + n) * g1b, inside * g1b)   # read: out of the RSS
            pt.file.release(off + i * g1b, inside * g1b)
        for j in range(inside, per):
            a_at, b_at = off + (i + j + n) * g1b, off + (i + j) * g1b
            raw = bytes(data[a_at:a_at + g1b]).ljust(g1b, b"\0")
            p1 = (int.from_bytes(raw[:n8], "little"), int.from_bytes(raw[n8:], "little"))
            b = bytes(data[b_at:b_at + g1b])
            p2 = (int.from_bytes(b[:n8], "little"), int.from_bytes(b[n8:], "little"))
            csh.update(sub_affine_u(p1, p2, curve.q, n8))
