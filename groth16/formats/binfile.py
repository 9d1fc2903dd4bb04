"""The iden3 binary container shared by .zkey, .wtns, .r1cs and .ptau files.

Layout: magic (4 bytes), version u32, nSections u32, then nSections times
(type u32, size u64, payload). Sections are indexed by type, never by position: snarkjs
writes them in different orders depending on the command that produced the file.
The file is memory-mapped, so big proving keys are read without copying.
"""

from __future__ import annotations

import mmap
import struct

from ..errors import FormatError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING; pathlib costs `zkqueue prove` ~10 ms of start-up
if TYPE_CHECKING:
    from pathlib import Path

HEADER_BYTES = 12
SECTION_HEADER_BYTES = 12


class BinFile:
    """A parsed container: `section(t)` returns section t's payload as a memoryview."""

    def __init__(self, path: str | Path, magic: bytes, kind: str, versions: tuple[int, ...],
                 *, native: bool = False):
        """Open and index `path`.

        `native`: map the file copy-on-write instead of read-only, so that `address()` can
        hand its memory to native code (ctypes takes addresses of writable buffers only).
        Nothing writes to it: the pages stay shared with the page cache.

        Raises:
            FormatError: unreadable, truncated, wrong magic or version, or a section that
                runs past the end of the file.
        """
        self.path = str(path)
        self.kind = kind
        try:
            with open(path, "rb") as f:
                size = f.seek(0, 2)
                if size == 0:
                    raise FormatError(f"empty file, expected a {kind}", path=path,
                                      expected=f"{kind} data", found="0 bytes")
                access = mmap.ACCESS_COPY if native else mmap.ACCESS_READ
                self._map = mmap.mmap(f.fileno(), 0, access=access)
        except OSError as exc:
            raise FormatError(f"cannot read {kind}: {exc.strerror}", path=path) from exc
        self.data = memoryview(self._map)
        if len(self.data) < HEADER_BYTES:
            raise FormatError(f"truncated {kind}: {len(self.data)} bytes, shorter than the "
                              f"{HEADER_BYTES}-byte header", path=path)
        found_magic = bytes(self.data[:4])
        if found_magic != magic:
            raise FormatError(f"not a {kind}: magic is {found_magic!r}, expected {magic!r}",
                              path=path, expected=magic, found=found_magic)
        self.version, n_sections = struct.unpack_from("<II", self.data, 4)
        if self.version not in versions:
            raise FormatError(f"unsupported {kind} version {self.version}, expected "
                              f"{' or '.join(map(str, versions))}", path=path,
                              expected=versions, found=self.version)
        self.sections: dict[int, tuple[int, int]] = {}
        pos = HEADER_BYTES
        for i in range(n_sections):
            if pos + SECTION_HEADER_BYTES > len(self.data):
                raise FormatError(f"truncated {kind}: header of section {i + 1} of {n_sections} "
                                  f"at byte {pos} is past the end ({len(self.data)} bytes)", path=path)
            stype, ssize = struct.unpack_from("<IQ", self.data, pos)
            pos += SECTION_HEADER_BYTES
            if pos + ssize > len(self.data):
                raise FormatError(f"truncated {kind}: section type {stype} needs {ssize} bytes at "
                                  f"byte {pos}, but the file ends at {len(self.data)}", path=path,
                                  expected=pos + ssize, found=len(self.data))
            if stype in self.sections:
                raise FormatError(f"corrupt {kind}: section type {stype} appears twice", path=path)
            self.sections[stype] = (pos, ssize)
            pos += ssize

    def address(self, offset: int = 0) -> int:
        """Memory address of byte `offset` of the file (a BinFile opened with native=True)."""
        import ctypes  # noqa: PLC0415 - only the native whole-prove needs it

        return ctypes.addressof(ctypes.c_char.from_buffer(self._map)) + offset

    def release(self, offset: int, size: int) -> None:
        """Drops the whole pages of bytes [offset, offset + size) from this process's resident
        set (a BinFile opened with native=True; the pages stay in the page cache and are read
        back if touched again): keeps the peak RSS of a one-shot prove down."""
        start = -(-offset // mmap.PAGESIZE) * mmap.PAGESIZE
        end = (offset + size) // mmap.PAGESIZE * mmap.PAGESIZE
        if end > start:
            self._map.madvise(mmap.MADV_DONTNEED, start, end - start)

    def section_offset(self, stype: int, name: str) -> int:
        """Byte offset of section `stype`'s payload in the file.

        Raises:
            FormatError: the section is missing.
        """
        self.section(stype, name)
        return self.sections[stype][0]

    def section(self, stype: int, name: str) -> memoryview:
        """Payload of section `stype` (named `name` in errors).

        Raises:
            FormatError: the section is missing.
        """
        if stype not in self.sections:
            raise FormatError(f"corrupt {self.kind}: section {stype} ({name}) is missing", path=self.path,
                              expected=f"section {stype}", found=sorted(self.sections))
        pos, size = self.sections[stype]
        return self.data[pos:pos + size]

    def expect_size(self, stype: int, name: str, expected: int) -> memoryview:
        """Section `stype`, checked to be exactly `expected` bytes long.

        Raises:
            FormatError: missing, or of another size.
        """
        sec = self.section(stype, name)
        if len(sec) != expected:
            raise FormatError(f"corrupt {self.kind}: section {stype} ({name}) is {len(sec)} bytes, "
                              f"expected {expected}", path=self.path, expected=expected, found=len(sec))
        return sec


def read_prime(buf: memoryview, offset: int, path: str, kind: str) -> tuple[int, int, int]:
    """Reads `n8 u32, prime[n8]` at offset; returns (n8, prime, offset after it).

    Raises:
        FormatError: n8 is not a whole number of 64-bit words up to 64 bytes, or runs past the section.
    """
    if offset + 4 > len(buf):
        raise FormatError(f"corrupt {kind}: header section too short", path=path)
    (n8,) = struct.unpack_from("<I", buf, offset)
    if n8 == 0 or n8 % 8 or n8 > 64 or offset + 4 + n8 > len(buf):
        raise FormatError(f"corrupt {kind}: field element size {n8} bytes is not valid", path=path,
                          expected="8..64, a multiple of 8", found=n8)
    prime = int.from_bytes(buf[offset + 4:offset + 4 + n8], "little")
    return n8, prime, offset + 4 + n8
