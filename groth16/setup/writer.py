"""Writing the iden3 binary container section by section, and the encodings the circuit
hash and the key share.

Every section's size is known before its first byte (the caller says it), so sections are
written straight through, never patched, and a short write is caught at the section's end.
"""

from __future__ import annotations

import struct

from ..errors import BackendError


class SectionWriter:
    """A .zkey being written: `begin(type, size)`, then `write` exactly `size` bytes."""

    def __init__(self, path: str, magic: bytes, version: int, n_sections: int):
        self.path = path
        self.f = open(path, "wb")  # noqa: SIM115 - closed by close()/abort()
        self.f.write(magic + struct.pack("<II", version, n_sections))
        self._left = 0
        self._type = None

    def begin(self, stype: int, size: int) -> None:
        """Starts section `stype` of exactly `size` bytes."""
        self._check_done()
        self.f.write(struct.pack("<IQ", stype, size))
        self._type, self._left = stype, size

    def write(self, data) -> None:
        """Appends bytes (bytes, memoryview or a numpy array) to the open section."""
        n = memoryview(data).nbytes
        if n > self._left:
            raise BackendError(f"section {self._type} overflows by {n - self._left} bytes", path=self.path)
        self.f.write(data)
        self._left -= n

    def _check_done(self) -> None:
        if self._left:
            raise BackendError(f"section {self._type} is {self._left} bytes short", path=self.path)

    def close(self) -> None:
        """Ends the file (the last section must be complete)."""
        self._check_done()
        self.f.close()

    def abort(self) -> None:
        """Closes and removes a half-written file."""
        import os  # noqa: PLC0415
        self.f.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def u32be(n: int) -> bytes:
    """A length as snarkjs's circuit hash takes it (hashU32: big-endian)."""
    return struct.pack(">I", n)
