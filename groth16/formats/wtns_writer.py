"""Writer for circom/snarkjs .wtns witness files (version 2).

Apart from the reader (wtns.py) because it needs no numpy: `zkqueue wtns calculate` writes a
witness without ever loading numpy, which would cost more start-up time than the witness itself
on a small circuit.
"""

from __future__ import annotations

import struct


def encode_wtns(prime: int, n8: int, values: bytes) -> bytes:
    """A .wtns file (version 2) holding `values`: n8-byte little-endian field elements.

    The layout circom's calculateWTNSBin writes, byte for byte: section 1 then section 2.
    """
    n_witness, rest = divmod(len(values), n8)
    if rest:
        raise ValueError(f"{len(values)} bytes of values is not a whole number of {n8}-byte elements")
    header = struct.pack("<I", n8) + prime.to_bytes(n8, "little") + struct.pack("<I", n_witness)
    return b"".join((b"wtns", struct.pack("<II", 2, 2),
                     struct.pack("<IQ", 1, len(header)), header,
                     struct.pack("<IQ", 2, len(values)), values))
