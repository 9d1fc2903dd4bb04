"""Random scalars from the operating system's CSPRNG (os.urandom), as `secrets` draws them.

`secrets` imports hmac, which loads OpenSSL: about 3.7 MB of resident memory and 10 ms of
start-up in a one-shot `zkqueue prove`, for the two blinding scalars and nothing else.
os.urandom is the same source `secrets` reads.
"""

from __future__ import annotations

import os


def randbits(k: int) -> int:
    """A uniform integer in [0, 2^k)."""
    if k <= 0:
        return 0
    return int.from_bytes(os.urandom((k + 7) // 8), "little") >> (-k % 8)


def randbelow(n: int) -> int:
    """A uniform integer in [0, n), by rejection (no modulo bias).

    Raises:
        ValueError: n is not positive.
    """
    if n <= 0:
        raise ValueError(f"randbelow needs a positive bound, got {n}")
    k = n.bit_length()
    while True:  # each draw is accepted with probability > 1/2
        x = randbits(k)
        if x < n:
            return x
