"""snarkjs's deterministic randomness: ffjavascript's ChaCha generator, the field elements and
curve points it draws (F.fromRng, G.fromRng), the beacon's seed (misc.rngFromBeaconParams)
and hashToG2 (keypair.js). A beacon is reproducible only if every draw is snarkjs's, bit for
bit, so each function follows its JavaScript original's order of draws.
"""

from __future__ import annotations

import hashlib
import struct

from .ec import Group

_MASK = 0xFFFFFFFF


def _rotl(v: int, n: int) -> int:
    return ((v << n) | (v >> (32 - n))) & _MASK


def _quarter(st: list[int], a: int, b: int, c: int, d: int) -> None:
    st[a] = (st[a] + st[b]) & _MASK
    st[d] = _rotl(st[d] ^ st[a], 16)
    st[c] = (st[c] + st[d]) & _MASK
    st[b] = _rotl(st[b] ^ st[c], 12)
    st[a] = (st[a] + st[b]) & _MASK
    st[d] = _rotl(st[d] ^ st[a], 8)
    st[c] = (st[c] + st[d]) & _MASK
    st[b] = _rotl(st[b] ^ st[c], 7)


class ChaCha:
    """ffjavascript's ChaCha20 stream of 32-bit words, from an 8-word seed (counter words 12-15)."""

    def __init__(self, seed: list[int]):
        self.state = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574, *seed, 0, 0, 0, 0]
        self.buff: list[int] = []
        self.idx = 16

    def next_u32(self) -> int:
        if self.idx == 16:
            self._update()
        v = self.buff[self.idx]
        self.idx += 1
        return v

    def next_u64(self) -> int:
        hi = self.next_u32()
        return hi * 0x100000000 + self.next_u32()

    def next_bool(self) -> bool:
        return (self.next_u32() & 1) == 1

    def _update(self) -> None:
        b = list(self.state)
        for _ in range(10):
            _quarter(b, 0, 4, 8, 12)
            _quarter(b, 1, 5, 9, 13)
            _quarter(b, 2, 6, 10, 14)
            _quarter(b, 3, 7, 11, 15)
            _quarter(b, 0, 5, 10, 15)
            _quarter(b, 1, 6, 11, 12)
            _quarter(b, 2, 7, 8, 13)
            _quarter(b, 3, 4, 9, 14)
        self.buff = [(b[i] + self.state[i]) & _MASK for i in range(16)]
        self.idx = 0
        for i in range(12, 16):   # the block counter, with carry
            self.state[i] = (self.state[i] + 1) & _MASK
            if self.state[i]:
                break


def seed_of(digest: bytes) -> list[int]:
    """The first 32 bytes of a hash as 8 big-endian words (snarkjs's ChaCha seeds)."""
    return list(struct.unpack(">8I", digest[:32]))


def raw_element(rng: ChaCha, p: int) -> int:
    """ffjavascript F.fromRng's integer: 64-bit draws (high word first), masked to p's bit
    length, redrawn until below p. ffjavascript stores it as the element's Montgomery form,
    so the element itself is raw * R^-1 (see element)."""
    n64 = (p.bit_length() + 63) // 64
    mask = (1 << p.bit_length()) - 1
    while True:
        v = 0
        for i in range(n64):
            v += rng.next_u64() << (64 * i)
        v &= mask
        if v < p:
            return v


def element(rng: ChaCha, p: int) -> int:
    """F.fromRng: a field element (standard value) of the prime field p."""
    n64 = (p.bit_length() + 63) // 64
    return raw_element(rng, p) * pow(1 << (64 * n64), -1, p) % p


def point(rng: ChaCha, g: Group):
    """G.fromRng: x drawn (and a sign bit) until x^3 + b is a square, y the root whose
    sign is the bit, times the cofactor."""
    F = g.F
    while True:
        x = element(rng, F.q) if F.degree == 1 else (element(rng, F.q), element(rng, F.q))
        greatest = rng.next_bool()
        x3b = F.add(F.mul(F.mul(x, x), x), g.b)
        if F.is_square(x3b):
            break
    y = F.sqrt(x3b)
    if greatest ^ F.is_negative(y):
        y = F.neg(y)
    p = (x, y)
    return g.mul(p, g.cofactor) if g.cofactor else p


def hash_to_g2(transcript: bytes, g2: Group):
    """keypair.js hashToG2: a G2 point from a ChaCha seeded with the hash's first 32 bytes."""
    return point(ChaCha(seed_of(transcript)), g2)


def beacon_rng(beacon_hash: bytes, num_iterations_exp: int) -> ChaCha:
    """misc.rngFromBeaconParams: sha256 applied 2^num_iterations_exp times, as the seed."""
    h = beacon_hash
    for _ in range(1 << num_iterations_exp):
        h = hashlib.sha256(h).digest()
    return ChaCha(seed_of(h))
